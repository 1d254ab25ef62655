import { createHash, timingSafeEqual } from 'node:crypto';
import { AppError, ErrorCodes } from '@mcb/core/errors';
import type { FastifyInstance } from 'fastify';

const digest = (s: string) => createHash('sha256').update(s).digest();

/**
 * Bearer authentication for every route of the app, including routes and plugins registered later and the 404
 * handler: an onRequest hook on the root instance runs before routing decisions leak anything. The compare runs on
 * SHA-256 digests, so neither the content nor the length of the token shows in the timing.
 */
export function installBearerAuth(app: FastifyInstance, token: string): void {
  const expected = digest(token);
  app.addHook('onRequest', async (req, reply) => {
    const header = req.headers.authorization ?? '';
    const match = /^Bearer[ ]+(\S+)\s*$/i.exec(header);
    const ok = match !== null && timingSafeEqual(digest(match[1]!), expected);
    if (!ok) {
      reply.header('www-authenticate', 'Bearer realm="console"');
      throw new AppError(ErrorCodes.UNAUTHORIZED, header ? 'invalid bearer token' : 'missing bearer token (Authorization: Bearer <CONSOLE_TOKEN>)');
    }
  });
}
