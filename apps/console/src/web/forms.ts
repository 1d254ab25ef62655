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

/** What a form's action did: its flash line for the page it came from, or another page to go to and its line. */
export type FormOutcome = string | { to: string; text: string };

/**
 * A form post from a page: run the action, then go back to `back` with what it did, or with why it was refused (a
 * refusal of ours, a code the error catalogue answers 4xx but 403, comes back as a flash line on the same page;
 * anything else goes to the error boundary). `refused`, when given, says instead which failures come back as a flash
 * line.
 */
export async function formAction(
  reply: FastifyReply,
  back: string,
  run: () => Promise<FormOutcome>,
  refused?: (e: unknown) => boolean,
) {
  try {
    const done = await run();
    return typeof done === 'string'
      ? redirectWithFlash(reply, back, { kind: 'ok', text: done })
      : redirectWithFlash(reply, done.to, { kind: 'ok', text: done.text });
  } catch (e) {
    if (refused) {
      if (refused(e)) return redirectWithFlash(reply, back, { kind: 'error', text: (e as Error).message });
      throw e;
    }
    // A role refusal stays a 403 (the page never offered the control); other refusals go back to the page.
    if (isAppError(e) && e.code !== ErrorCodes.FORBIDDEN && isRefusal(e.code))
      return redirectWithFlash(reply, back, { kind: 'error', text: e.message });
    throw e;
  }
}
