import { coerceError, ErrorCodes, isAppError, statusOf, type AppError, type ErrorCode } from '@mcb/core/errors';
import { PlatformCodeError } from '@mcb/core/platform';
import { isDatabaseDown } from '@mcb/settlement';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { hasZodFastifySchemaValidationErrors } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { errorPage } from './web/error-page.ts';

/** Transport failures of the platform are described by code only: their messages name hosts and ports. */
const PLATFORM_MESSAGES: Partial<Record<ErrorCode, string>> = {
  [ErrorCodes.PLATFORM_UNREACHABLE]: 'the platform is unreachable; retry later',
  [ErrorCodes.PLATFORM_TIMEOUT]: 'the platform did not answer in time; retry later',
  [ErrorCodes.PLATFORM_HTTP_ERROR]: 'the platform answered with an HTTP error',
  [ErrorCodes.PLATFORM_BAD_RESPONSE]: 'the platform answered with a reply of an unexpected shape',
};

/** `{field, message}` for each zod issue; body fields are named by their path (`params.accountNo`). */
function validationProblems(err: FastifyError & { validation: { instancePath: string; message?: string }[] }) {
  const context = err.validationContext ?? 'body';
  return err.validation.map((v) => {
    const path = v.instancePath.replace(/^\//, '').replaceAll('/', '.');
    return {
      field: context === 'body' ? path || 'body' : path ? `${context}.${path}` : context,
      message: v.message ?? 'invalid',
    };
  });
}

/**
 * The console's one HTTP error boundary. An AppError is answered with its code's status from the error catalogue
 * (`@mcb/core/errors`, listed in docs/errors.md and docs/console.md); a status of 500 is answered INTERNAL_ERROR.
 * A database that is not there (the retry policy's `isDatabaseDown`) is 503 DB_UNAVAILABLE.
 * Only our own AppError messages reach a body; stacks, SQL and causes stay in the logs.
 */
export function installErrorHandler(app: FastifyInstance): void {
  app.setErrorHandler(async (error: unknown, req: FastifyRequest, reply: FastifyReply) => {
    const requestId = req.id;
    if (hasZodFastifySchemaValidationErrors(error)) {
      const errors = validationProblems(error);
      req.log.info({ code: ErrorCodes.REQUEST_INVALID, fields: errors.map((e) => e.field) }, 'request invalid');
      return respond(req, reply, 400, {
        code: ErrorCodes.REQUEST_INVALID,
        message: 'the request does not match the schema',
        errors,
        requestId,
      });
    }
    if (isAppError(error)) return sendAppError(error, req, reply);
    // A page's own parse of its query or form (the API's routes validate through their schemas, above).
    if (error instanceof z.ZodError) {
      const errors = error.issues.map((i) => ({ field: i.path.join('.') || 'request', message: i.message }));
      req.log.info({ code: ErrorCodes.REQUEST_INVALID, fields: errors.map((e) => e.field) }, 'request invalid');
      return respond(req, reply, 400, {
        code: ErrorCodes.REQUEST_INVALID,
        message: `invalid ${errors.map((e) => `${e.field}: ${e.message}`).join('; ')}`.slice(0, 500),
        errors,
        requestId,
      });
    }

    const fastifyStatus = (error as FastifyError).statusCode;
    if (typeof fastifyStatus === 'number' && fastifyStatus >= 400 && fastifyStatus < 500) {
      // Fastify's own client errors (bad JSON, wrong content type, body too large): their messages are safe.
      const message = (error as Error).message;
      req.log.info({ code: (error as FastifyError).code, status: fastifyStatus }, 'request refused');
      return respond(req, reply, fastifyStatus, { code: ErrorCodes.REQUEST_INVALID, message, requestId });
    }
    if (isDatabaseDown(error)) {
      req.log.error({ err: coerceError(error) }, 'database unavailable');
      reply.header('retry-after', '5');
      return respond(req, reply, 503, {
        code: ErrorCodes.DB_UNAVAILABLE,
        message: 'the database is unavailable; retry later',
        requestId,
      });
    }
    req.log.error({ err: coerceError(error) }, 'unhandled error');
    return respond(req, reply, 500, {
      code: ErrorCodes.INTERNAL_ERROR,
      message: `internal error (request ${requestId})`,
      requestId,
    });
  });
}

/** A browser page (not /api, not bull-board's own API) asked for HTML. */
function wantsPage(req: FastifyRequest): boolean {
  const path = req.url.split('?')[0]!;
  return !path.startsWith('/api/') && !path.includes('/api/') && /\btext\/html\b/.test(req.headers.accept ?? '');
}

/** The one way out of this boundary: the JSON error body, or for a page the same status, code and message as HTML. */
function respond(
  req: FastifyRequest,
  reply: FastifyReply,
  status: number,
  body: { code: string; message: string; requestId: string } & Record<string, unknown>,
) {
  reply.code(status);
  if (!wantsPage(req)) return reply.send(body);
  // A page names the role, not the internal action (`replays.plan`) the API's message names for scripts.
  const message =
    status === 403 && typeof body.requiredRole === 'string'
      ? `This needs the role ${body.requiredRole}; you are signed in as ${req.operator?.role ?? 'nobody'}.`
      : body.message;
  return reply
    .type('text/html; charset=utf-8')
    .header('cache-control', 'no-store')
    .send(errorPage(status, body.code, message, body.requestId, req.operator).value);
}

function sendAppError(error: AppError, req: FastifyRequest, reply: FastifyReply) {
  const status = statusOf(error.code);
  const requestId = req.id;
  if (status >= 500) req.log.error({ err: error, code: error.code }, 'request failed');
  else req.log.info({ code: error.code, status }, 'request refused');
  if (status === 500) {
    return respond(req, reply, 500, {
      code: ErrorCodes.INTERNAL_ERROR,
      message: `internal error (request ${requestId})`,
      requestId,
    });
  }
  if (status === 503) reply.header('retry-after', '30');
  const message = PLATFORM_MESSAGES[error.code] ?? error.message;
  const body: { code: string; message: string; requestId: string } & Record<string, unknown> = {
    code: error.code,
    message,
    requestId,
  };
  const errors = error.details?.errors;
  if (Array.isArray(errors)) body.errors = errors;
  // A role refusal names the role that may (the UI and the CLI say it).
  if (typeof error.details?.requiredRole === 'string') body.requiredRole = error.details.requiredRole;
  // Which merchants: the refs holding an ambiguous order number (MERCHANT_REQUIRED), or those a `merchant` may name.
  const merchants = error.details?.merchants;
  if (Array.isArray(merchants)) body.merchants = merchants;
  // A stale replay plan: the dry run as it stands now, to start from (PLAN_STALE).
  if (error.code === ErrorCodes.PLAN_STALE && error.details?.plan) body.plan = error.details.plan;
  // The platform's own answer, when there was one (a PlatformCodeError, or an error that gives it a meaning).
  const platformCode = error instanceof PlatformCodeError ? error.platformCode : error.details?.platformCode;
  if (typeof platformCode === 'number') {
    body.platformCode = platformCode;
    body.platformMessage =
      error instanceof PlatformCodeError ? error.platformMessage : String(error.details?.platformMessage ?? '');
  }
  return respond(req, reply, status, body);
}
