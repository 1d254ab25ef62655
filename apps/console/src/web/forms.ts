import { ErrorCodes, isAppError, isRefusal } from '@mcb/core/errors';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { redirectWithFlash } from './send.ts';

/** Parse HTML form posts (urlencoded) in this plugin scope only; the API stays JSON-only. */
export function acceptForms(app: FastifyInstance): void {
  app.addContentTypeParser(
    'application/x-www-form-urlencoded',
    { parseAs: 'string', bodyLimit: 16_384 },
    (_req, body, done) => {
      done(null, Object.fromEntries(new URLSearchParams(body as string)));
    },
  );
}

/**
 * A form post from a page: run the action, then go back to `back` with what it did, or with why it was refused (a
 * refusal of ours, a code the error catalogue answers 4xx but 403, comes back as a flash line on the same page;
 * anything else goes to the error boundary).
 */
export async function formAction(reply: FastifyReply, back: string, run: () => Promise<string>) {
  try {
    return redirectWithFlash(reply, back, { kind: 'ok', text: await run() });
  } catch (e) {
    // A role refusal stays a 403 (the page never offered the control); other refusals go back to the page.
    if (isAppError(e) && e.code !== ErrorCodes.FORBIDDEN && isRefusal(e.code))
      return redirectWithFlash(reply, back, { kind: 'error', text: e.message });
    throw e;
  }
}
