import { AppError, ErrorCodes } from '@mcb/core/errors';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { z } from 'zod';
import type { Action } from '../operators/roles.ts';
import { formAction, type FormOutcome } from './forms.ts';
import { route, type RouteRow } from './route-table.ts';

/**
 * The pages' rows of the route tables (STYLE 25): the same {@link RouteRow} as the API's, registered by the same loop
 * and role-checked by the same hook (web/route-table.ts), hidden from the OpenAPI document. A page that shows
 * something is a {@link pageRoute}; a form post is a {@link formRoute}, whose fields are parsed by the zod schema on
 * its row before anything runs.
 */

/** A page (GET): its action is `read`, or what the page is for (`replays.plan` for the replay wizard). */
export function pageRoute(r: {
  url: string;
  action: Action;
  handler: (req: FastifyRequest, reply: FastifyReply) => Promise<unknown>;
}): RouteRow {
  return route({ method: 'GET', url: r.url, action: r.action, schema: { hide: true }, handler: r.handler });
}

/** One form post: what it does, what it reads, where it goes back to, and the action it runs. */
export interface FormRow<F extends z.ZodType, P extends z.ZodType> {
  url: string;
  /** The action the post does (roles.ts): the role check refuses a role that may not, before the form is read. */
  action: Action;
  /** What it is done to, for the audit row of a refusal (the same target the action writes). */
  target: (req: FastifyRequest) => string;
  /**
   * The form's fields. A post that does not match comes back to {@link FormRow.back} with the field and why
   * (400 REQUEST_INVALID as a flash line), and nothing runs.
   */
  form: F;
  /** The path parameters, validated before the handler (a bad one is a 400 page). @defaultValue none */
  params?: P;
  /** Where the post goes back to with its flash line: from the form as posted, a local path. */
  back: (req: FastifyRequest) => string;
  /** Which failures come back as a flash line. @defaultValue formAction's: our refusals but 403 and server-side */
  refused?: (e: unknown) => boolean;
  /** Do it, with the parsed form: the flash line for {@link FormRow.back}, or another page to go to and its line. */
  run: (req: FastifyRequest, input: { form: z.output<F>; params: z.output<P> }) => Promise<FormOutcome>;
}

/** A form post's row: the form parsed by its schema, then {@link FormRow.run}, its outcome a flash line (forms.ts). */
export function formRoute<F extends z.ZodType, P extends z.ZodType = z.ZodType<Record<string, never>>>(
  r: FormRow<F, P>,
): RouteRow {
  return route({
    method: 'POST',
    url: r.url,
    action: r.action,
    target: r.target,
    schema: { hide: true, ...(r.params ? { params: r.params } : {}) },
    handler: async (req, reply) =>
      formAction(
        reply,
        r.back(req),
        async () => r.run(req, { form: parseForm(r.form, req.body), params: req.params as z.output<P> }),
        r.refused,
      ),
  });
}

/** The fields of a posted form, or 400 REQUEST_INVALID naming each field that is wrong and why. */
export function parseForm<F extends z.ZodType>(schema: F, body: unknown): z.output<F> {
  const parsed = schema.safeParse(body ?? {});
  if (parsed.success) return parsed.data;
  const errors = parsed.error.issues.map((i) => ({ field: i.path.join('.') || 'form', message: i.message }));
  throw new AppError(
    ErrorCodes.REQUEST_INVALID,
    `the form is not valid: ${errors.map((e) => `${e.field}: ${e.message}`).join('; ')}`,
    { details: { errors } },
  );
}
