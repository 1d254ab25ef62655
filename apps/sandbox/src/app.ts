import { encryptRecord, parsePublicKey } from '@mcb/core/callback';
import { DEFAULT_MERCHANT_REF, MERCHANT_REF_PATTERN } from '@mcb/core/config';
import { AppError, coerceError, ErrorCodes, isAppError, statusOf } from '@mcb/core/errors';
import { createLogger, type Logger } from '@mcb/core/logger';
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { checkCallbackUrl } from './callback-url.ts';
import { FIRST_ATTEMPT_LIMIT_MS, type EncryptRecord } from './delivery.ts';
import type { SandboxMerchant } from './model.ts';
import { registerControlRoutes } from './routes/control.ts';
import { registerPlatformRoutes } from './routes/platform.ts';
import { createSimulator, type Simulator } from './simulator.ts';

export type { Attempt, Delivery, GlobalFaults, OrderFaults, SandboxMerchant, SandboxOrder } from './model.ts';
export type { CreateOrderInput, ForgeInput, ForgeWhat, MerchantView, Simulator } from './simulator.ts';
export { CATALOG } from './catalog.ts';
export { MAX_ATTEMPTS, RETRY_GAPS_MS } from './delivery.ts';
export { GET_ORDER_PATH, GET_PAYMENT_METHODS_PATH, PLATFORM_CODES } from './routes/platform.ts';
export { isSuccessReply } from './reply-rules.ts';

declare module 'fastify' {
  interface FastifyInstance {
    /** The simulator behind the routes: create, finalise, forge, await deliveries (tests and the demo). */
    sandbox: Simulator;
  }
}

/**
 * Options of {@link buildApp}. The sandbox simulates one merchant account (`merchantNo` and `merchantPublicKeyPem`,
 * ref `default`) or several (`merchants`), never both.
 */
export interface SandboxOptions {
  /** The merchant number the sandbox serves (and writes into every record), when it simulates one account. */
  merchantNo?: string;
  /** That merchant's RSA public key (PEM, or Base64 DER SPKI as uploaded to a console); records are encrypted with it. */
  merchantPublicKeyPem?: string;
  /**
   * Several merchant accounts, each with its own number and key (docs/merchants.md); the first is the one an
   * operation naming no merchant is for. Instead of `merchantNo` and `merchantPublicKeyPem`.
   */
  merchants?: SandboxMerchant[];
  /** Platform time runs this many times faster than real time (600 turns 3 minutes into 0.3 s). @defaultValue 1 */
  timeScale?: number;
  /**
   * Console default callback URL for pay-ins; `{ref}` in it becomes each account's ref (one receiver route per
   * merchant, e.g. `https://ingest.example/callbacks/m/{ref}/payin`). @defaultValue none (orders carry their own)
   */
  payinCallbackUrl?: string;
  /** Console default callback URL for payouts, `{ref}` replaced as for pay-ins. @defaultValue none */
  payoutCallbackUrl?: string;
  /** Accept http(s) callback URLs on this machine (localhost, 127.0.0.0/8, ::1). @defaultValue true */
  allowLocalCallbacks?: boolean;
  /** Delay of attempt 1 after the order completes, in platform ms (scaled); at most 30000 (spec). @defaultValue 1000 */
  firstAttemptDelayMs?: number;
  /** How long the receiver may take to reply, in real ms (not scaled); longer is a failed attempt. @defaultValue 10000 */
  replyTimeoutMs?: number;
  /** A pino logger. @defaultValue createLogger({ name: 'sandbox', level: 'warn' }) */
  logger?: Logger;
  /** Replaces the codec's `encryptRecord` (tests of encryption failures). @defaultValue encryptRecord */
  encrypt?: EncryptRecord;
}

/** A console default URL for `ref`: the account's own, else the sandbox's with `{ref}` replaced. */
const urlOf = (own: string | undefined, template: string | undefined, ref: string) =>
  own ?? template?.replaceAll('{ref}', ref);

/** The merchant accounts the options describe, each with its console URLs resolved, and what is wrong with them. */
function merchantsOf(o: SandboxOptions): { merchants: SandboxMerchant[]; problems: string[] } {
  const problems: string[] = [];
  const single = o.merchants === undefined;
  if (!single && (o.merchantNo !== undefined || o.merchantPublicKeyPem !== undefined))
    problems.push('merchants: give either merchants or merchantNo and merchantPublicKeyPem, not both');
  const given: SandboxMerchant[] = single
    ? [
        {
          ref: DEFAULT_MERCHANT_REF,
          merchantNo: o.merchantNo ?? '',
          merchantPublicKeyPem: o.merchantPublicKeyPem ?? '',
        },
      ]
    : o.merchants!;
  if (given.length === 0) problems.push('merchants: expected at least one merchant account');
  const allowLocal = o.allowLocalCallbacks ?? true;
  const refs = new Set<string>();
  const numbers = new Set<string>();
  const merchants = given.map((m, i) => {
    // One account keeps today's names; several are named by their position and field.
    const field = (name: string) => (single ? name : `merchants[${i}].${name}`);
    if (!single && !MERCHANT_REF_PATTERN.test(m.ref ?? ''))
      problems.push(`${field('ref')}: expected 1 to 32 of a-z, 0-9 and -`);
    else if (refs.has(m.ref)) problems.push(`${field('ref')}: the same as another account's`);
    refs.add(m.ref);
    if (!m.merchantNo?.trim()) problems.push(`${field('merchantNo')}: required`);
    else if (numbers.has(m.merchantNo.trim())) problems.push(`${field('merchantNo')}: the same as another account's`);
    numbers.add(m.merchantNo?.trim());
    try {
      parsePublicKey(m.merchantPublicKeyPem ?? '');
    } catch {
      problems.push(`${field('merchantPublicKeyPem')}: not a usable RSA public key`);
    }
    const resolved: SandboxMerchant = {
      ref: m.ref,
      merchantNo: m.merchantNo?.trim(),
      merchantPublicKeyPem: m.merchantPublicKeyPem,
      payinCallbackUrl: urlOf(m.payinCallbackUrl, o.payinCallbackUrl, m.ref),
      payoutCallbackUrl: urlOf(m.payoutCallbackUrl, o.payoutCallbackUrl, m.ref),
    };
    for (const name of ['payinCallbackUrl', 'payoutCallbackUrl'] as const) {
      const url = resolved[name];
      const problem = url === undefined ? undefined : checkCallbackUrl(url, allowLocal);
      if (problem) problems.push(`${m[name] === undefined && !single ? name : field(name)}: ${problem}`);
    }
    return resolved;
  });
  return { merchants, problems: [...new Set(problems)] };
}

/** The merchant accounts of `o`, checked with every other option. @throws AppError CONFIG_INVALID naming each problem */
function checkOptions(o: SandboxOptions): SandboxMerchant[] {
  const { merchants, problems } = merchantsOf(o);
  const scale = o.timeScale ?? 1;
  if (!(Number.isFinite(scale) && scale > 0 && scale <= 1_000_000))
    problems.push('timeScale: expected a number > 0 and ≤ 1000000');
  const first = o.firstAttemptDelayMs ?? 1000;
  if (!(Number.isFinite(first) && first >= 0 && first <= FIRST_ATTEMPT_LIMIT_MS)) {
    problems.push(`firstAttemptDelayMs: expected 0 to ${FIRST_ATTEMPT_LIMIT_MS} (the spec's "within 30 seconds")`);
  }
  const timeout = o.replyTimeoutMs ?? 10_000;
  if (!(Number.isFinite(timeout) && timeout >= 1 && timeout <= 600_000))
    problems.push('replyTimeoutMs: expected 1 to 600000');
  if (problems.length > 0) {
    throw new AppError(ErrorCodes.CONFIG_INVALID, `invalid sandbox options:\n  - ${problems.join('\n  - ')}`, {
      details: { problems },
    });
  }
  return merchants;
}

/**
 * The platform simulator as a fastify app: getPaymentMethods and Get order on the platform's paths, the control
 * API under /control, and callback delivery on the spec's schedule. State lives in memory (see docs/sandbox.md).
 */
export async function buildApp(opts: SandboxOptions): Promise<FastifyInstance> {
  const merchants = checkOptions(opts);
  const logger = opts.logger ?? createLogger({ name: 'sandbox', level: 'warn' });
  // Closing must not wait for a request the apiDown=hang switch holds open: drop every connection on close.
  const app = Fastify({ loggerInstance: logger as FastifyBaseLogger, forceCloseConnections: true });
  const closing = new AbortController();
  const sim = createSimulator({
    merchants,
    timeScale: opts.timeScale ?? 1,
    firstAttemptDelayMs: opts.firstAttemptDelayMs ?? 1000,
    replyTimeoutMs: opts.replyTimeoutMs ?? 10_000,
    allowLocalCallbacks: opts.allowLocalCallbacks ?? true,
    encrypt: opts.encrypt ?? encryptRecord,
    logger,
  });
  app.decorate('sandbox', sim);

  // getPaymentMethods may be sent as a form (PLATFORM_CONTENT_TYPE=form); fastify parses only JSON by itself.
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_req, body, done) => {
    done(null, Object.fromEntries(new URLSearchParams(body as string)));
  });

  app.setErrorHandler((err, req, reply) => {
    if (isAppError(err)) {
      const status = statusOf(err.code);
      if (status >= 500) req.log.error({ err }, 'sandbox error');
      return reply.code(status).send({
        error: err.code,
        message: status >= 500 ? 'internal error' : err.message,
        details: status >= 500 ? undefined : err.details,
      });
    }
    const e = coerceError(err);
    const status = (err as { statusCode?: number }).statusCode;
    if (status !== undefined && status >= 400 && status < 500) {
      return reply.code(status).send({ error: ErrorCodes.REQUEST_INVALID, message: e.message });
    }
    req.log.error({ err: e }, 'sandbox error');
    return reply.code(500).send({ error: ErrorCodes.INTERNAL_ERROR, message: 'internal error' });
  });

  app.get('/healthz', async () => ({ ok: true }));
  registerPlatformRoutes(app, sim, closing.signal);
  registerControlRoutes(app, sim);

  app.addHook('preClose', async () => {
    closing.abort();
  });
  app.addHook('onClose', async () => {
    await sim.close();
  });
  return app;
}
