import type { FastifyInstance } from 'fastify';
import { coerceError } from '@mcb/core/errors';
import type { Logger } from '@mcb/core/logger';
import { CONTENT_FAILURE_STATUS, sendText } from './reply.ts';
import { ALL_CALLBACK_ROUTES, isCallbackPath } from './routes/callbacks.ts';

/** The path a request asked for, without its query. */
const pathOf = (url: string): string => url.split('?')[0] ?? '';

/**
 * The app's one HTTP boundary: what reaches a handler (application/json as raw text), what is refused before one
 * runs (shutting down), and how every failure is answered (the uniform `fail`; nothing internal in a body).
 */
export function installReplyBoundary(
  app: FastifyInstance,
  deps: { logger: Logger; shuttingDown: () => boolean },
): void {
  const { logger, shuttingDown } = deps;
  // Only application/json is accepted; the raw text reaches the handler so that a malformed body fails the same
  // way as every other content failure. Any other media type is FST_ERR_CTP_INVALID_MEDIA_TYPE (415).
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => done(null, body));

  app.addHook('onRequest', async (request, reply) => {
    // Decided on the route fastify matched, whatever spelling of it was sent.
    const route = request.routeOptions.url;
    if (shuttingDown() && route !== undefined && ALL_CALLBACK_ROUTES.has(route)) return sendText(reply, 503, 'fail');
  });

  app.setErrorHandler((error, request, reply) => {
    const status = (error as { statusCode?: number }).statusCode;
    if (status === 413 || status === 415) {
      logger.warn(
        { url: request.url, reqId: request.id, code: (error as { code?: string }).code },
        'callback rejected',
      );
      return sendText(reply, status, 'fail');
    }
    if (status !== undefined && status >= 400 && status < 500) return sendText(reply, CONTENT_FAILURE_STATUS, 'fail');
    logger.error({ url: request.url, reqId: request.id, err: coerceError(error) }, 'unexpected error in ingest');
    return sendText(reply, 500, 'fail');
  });

  app.setNotFoundHandler((request, reply) => {
    if (isCallbackPath(pathOf(request.url))) return sendText(reply.header('allow', 'POST'), 405, 'fail');
    return sendText(reply, 404, 'fail');
  });
}
