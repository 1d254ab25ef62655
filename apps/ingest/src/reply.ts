import type { FastifyReply } from 'fastify';

/**
 * Every reply of the callback routes goes through here, so that all failures look alike to a sender (same headers,
 * same body) and the platform's reply rule (2xx and plain `success`) is met exactly.
 */
export function sendText(reply: FastifyReply, status: number, body: 'success' | 'fail'): FastifyReply {
  return reply
    .code(status)
    .header('content-type', 'text/plain; charset=utf-8')
    .header('cache-control', 'no-store')
    .send(body);
}

/** Status of a content failure (Base64, decryption, JSON, schema, merchant, kind): one for all of them. */
export const CONTENT_FAILURE_STATUS = 400;
/** Status when the job could not be stored durably: the platform retries later. */
export const UNAVAILABLE_STATUS = 503;
