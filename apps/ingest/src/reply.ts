import { ErrorCodes, statusOf } from '@mcb/core/errors';
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

/**
 * Status of a content failure (Base64, decryption, JSON, schema, merchant, kind): one for all of them, the error
 * catalogue's status of every CALLBACK_ code (a core test holds them equal).
 */
export const CONTENT_FAILURE_STATUS = statusOf(ErrorCodes.CALLBACK_BAD_REQUEST);
/** Status when the job could not be stored durably (ENQUEUE_FAILED, and the REDIS_ refusals): the platform retries. */
export const UNAVAILABLE_STATUS = statusOf(ErrorCodes.ENQUEUE_FAILED);
