import { Agent, request, errors as undiciErrors, type Dispatcher } from 'undici';
import { z } from 'zod';
import { AppError, ErrorCodes } from '../errors.ts';
import { TRANSIENT_NETWORK_CODES } from '../spec.ts';

/**
 * The hook for request authentication. The spec does not show how API requests are authenticated, so every
 * platform request passes through here: add headers, sign the body, or leave it as it is.
 */
export type AuthenticateRequest = (req: {
  method: 'POST';
  path: string;
  headers: Record<string, string>;
  body: string;
}) => void | Promise<void>;

/** Options of {@link createPlatformHttp}. */
export interface PlatformHttpOptions {
  /** The platform's `{base_url}`. */
  baseUrl: string;
  /** Overall deadline of one request, in ms; keep it well under the worker's job lock. @defaultValue 10000 */
  timeoutMs?: number;
  /** TCP/TLS connect deadline, in ms. @defaultValue min(3000, timeoutMs) */
  connectTimeoutMs?: number;
  /** Largest response body accepted, in bytes. @defaultValue 4 MiB */
  maxResponseBytes?: number;
  /** See {@link AuthenticateRequest}. @defaultValue no change */
  authenticate?: AuthenticateRequest;
  /** A dispatcher to use instead of the client's own pooled Agent (tests, proxies). */
  dispatcher?: Dispatcher;
  /**
   * Keep-alive connections to the platform at most; requests beyond it queue in the client. Size it for the Get
   * orders in flight (the worker passes WORKER_CONCURRENCY). @defaultValue no limit
   */
  connections?: number;
}

/** The platform's reply envelope: `{code, message, data}`; `code` 0 is success. */
const envelopeSchema = z.object({
  code: z.number().int(),
  message: z.string().nullish(),
  data: z.unknown().optional(),
});

/** A low-level platform client: POST a body, check the envelope, return `data` parsed by a schema. */
export interface PlatformHttp {
  post<T extends z.ZodType>(
    path: string,
    body: { kind: 'json'; value: unknown } | { kind: 'form'; value: Record<string, string> },
    dataSchema: T,
    options?: {
      signal?: AbortSignal;
      /** Parses the reply text; pass a lossless parser when `data` carries amounts. @defaultValue JSON.parse */
      parseJson?: (text: string) => unknown;
    },
  ): Promise<z.output<T>>;
  close(): Promise<void>;
}

function isTransientNetworkError(e: unknown): boolean {
  const code = (e as { code?: string }).code ?? '';
  return (
    e instanceof undiciErrors.SocketError ||
    e instanceof undiciErrors.ConnectTimeoutError ||
    TRANSIENT_NETWORK_CODES.has(code)
  );
}

type PostBody = { kind: 'json'; value: unknown } | { kind: 'form'; value: Record<string, string> };

export function createPlatformHttp(options: PlatformHttpOptions): PlatformHttp {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const maxBytes = options.maxResponseBytes ?? 4 * 1024 * 1024;
  const ownAgent = options.dispatcher
    ? undefined
    : new Agent({
        connect: { timeout: options.connectTimeoutMs ?? Math.min(3000, timeoutMs) },
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
        keepAliveTimeout: 10_000,
        ...(options.connections ? { connections: options.connections } : {}),
      });
  const dispatcher = options.dispatcher ?? ownAgent!;
  const base = options.baseUrl.replace(/\/+$/, '');

  async function post<T extends z.ZodType>(
    path: string,
    body: PostBody,
    dataSchema: T,
    callOptions: { signal?: AbortSignal; parseJson?: (text: string) => unknown } = {},
  ): Promise<z.output<T>> {
    const { encoded, headers } = encodeBody(body);
    await options.authenticate?.({ method: 'POST', path, headers, body: encoded });

    // One overall deadline on top of undici's per-phase timeouts, combined with the caller's signal.
    const deadline = AbortSignal.timeout(timeoutMs);
    const signal = callOptions.signal ? AbortSignal.any([callOptions.signal, deadline]) : deadline;
    const where = { path };

    let statusCode: number;
    let text: string;
    let contentType = '';
    try {
      const res = await request(`${base}${path}`, { method: 'POST', headers, body: encoded, dispatcher, signal });
      statusCode = res.statusCode;
      contentType = String(res.headers['content-type'] ?? '').slice(0, 100);
      text = await readLimited(res, maxBytes, where);
    } catch (e) {
      throw transportError(e, { path, timeoutMs, callerSignal: callOptions.signal, deadline });
    }

    checkStatus(statusCode, path);
    const envelope = parseEnvelope(text, callOptions.parseJson ?? JSON.parse, { path, statusCode, contentType });
    if (envelope.code !== 0) {
      throw new PlatformCodeError(envelope.code, envelope.message ?? '', path);
    }
    const data = dataSchema.safeParse(envelope.data);
    if (!data.success) {
      throw new AppError(
        ErrorCodes.PLATFORM_BAD_RESPONSE,
        `platform data from ${path} does not match the expected shape`,
        {
          details: { ...where, issues: data.error.issues.slice(0, 20).map((i) => `${i.path.join('.')}: ${i.message}`) },
        },
      );
    }
    return data.data;
  }

  return {
    post,
    async close() {
      await ownAgent?.close();
    },
  };
}

/** The body as sent, and the headers that describe it. */
function encodeBody(body: PostBody): { encoded: string; headers: Record<string, string> } {
  const encoded = body.kind === 'json' ? JSON.stringify(body.value) : new URLSearchParams(body.value).toString();
  const headers: Record<string, string> = {
    'content-type': body.kind === 'json' ? 'application/json' : 'application/x-www-form-urlencoded',
    accept: 'application/json',
  };
  return { encoded, headers };
}

/** The reply's text, refused (transient) once it is over `maxBytes`, whether declared or as it streams. */
async function readLimited(res: Dispatcher.ResponseData, maxBytes: number, where: { path: string }): Promise<string> {
  const declared = Number(res.headers['content-length'] ?? 0);
  if (declared > maxBytes) {
    res.body.destroy();
    throw new AppError(ErrorCodes.PLATFORM_BAD_RESPONSE, `platform reply of ${declared} bytes is over the limit`, {
      details: where,
      transient: true,
    });
  }
  // Counted as it streams: a chunked reply declares no length and must not grow without bound either.
  const chunks: Buffer[] = [];
  let received = 0;
  for await (const chunk of res.body as AsyncIterable<Buffer>) {
    received += chunk.length;
    if (received > maxBytes) {
      res.body.destroy();
      throw new AppError(ErrorCodes.PLATFORM_BAD_RESPONSE, `platform reply is over the limit of ${maxBytes} bytes`, {
        details: where,
        transient: true,
      });
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** What a failed request (no complete reply) means: aborted by the caller, timed out, or the platform unreachable. */
function transportError(
  e: unknown,
  call: { path: string; timeoutMs: number; callerSignal: AbortSignal | undefined; deadline: AbortSignal },
): AppError {
  const { path, timeoutMs, deadline } = call;
  const where = { path };
  if (e instanceof AppError) return e;
  if (call.callerSignal?.aborted) {
    return new AppError(ErrorCodes.PLATFORM_ABORTED, `platform request ${path} aborted`, {
      cause: e,
      details: where,
    });
  }
  if (deadline.aborted || e instanceof undiciErrors.HeadersTimeoutError || e instanceof undiciErrors.BodyTimeoutError) {
    return new AppError(ErrorCodes.PLATFORM_TIMEOUT, `platform request ${path} timed out after ${timeoutMs} ms`, {
      cause: e,
      details: where,
      transient: true,
    });
  }
  if (isTransientNetworkError(e)) {
    return new AppError(ErrorCodes.PLATFORM_UNREACHABLE, `platform unreachable (${(e as Error).message})`, {
      cause: e,
      details: where,
      transient: true,
    });
  }
  return new AppError(ErrorCodes.PLATFORM_UNREACHABLE, `platform request ${path} failed: ${(e as Error).message}`, {
    cause: e,
    details: where,
    transient: true,
  });
}

/** Throw unless the HTTP status is 2xx: 5xx, 429 and 408 are transient, any other is not. */
function checkStatus(statusCode: number, path: string): void {
  const where = { path };
  if (statusCode >= 500 || statusCode === 429 || statusCode === 408) {
    throw new AppError(ErrorCodes.PLATFORM_HTTP_ERROR, `platform answered HTTP ${statusCode} for ${path}`, {
      details: { ...where, status: statusCode },
      transient: true,
    });
  }
  if (statusCode < 200 || statusCode >= 300) {
    // 3xx/4xx: not a confirmation, and not a transport failure either. Get order's caller waits for a bounded time
    // (as for a refusal), then decides; it is not retried blindly and not given up at once.
    throw new AppError(ErrorCodes.PLATFORM_HTTP_ERROR, `platform answered HTTP ${statusCode} for ${path}`, {
      details: { ...where, status: statusCode },
    });
  }
}

/** The platform's envelope `{code, message, data}` read from a 2xx reply's text. */
function parseEnvelope(
  text: string,
  parseJson: (text: string) => unknown,
  reply: { path: string; statusCode: number; contentType: string },
): z.output<typeof envelopeSchema> {
  const { path, statusCode, contentType } = reply;
  const where = { path };
  // A 2xx that is not the platform's JSON envelope (an HTML maintenance page from a proxy during a deploy, an empty
  // or cut body) is a passing fault of the path to the platform, not an answer: transient, like a 5xx, and counted
  // by the circuit breaker. The content type is named in the message; a JSON body is read whatever it declares.
  let json: unknown;
  try {
    json = parseJson(text);
  } catch {
    throw new AppError(
      ErrorCodes.PLATFORM_BAD_RESPONSE,
      `platform reply to ${path} is not JSON (HTTP ${statusCode}, content-type ${contentType || 'none'})`,
      {
        details: { ...where, status: statusCode, contentType },
        transient: true,
      },
    );
  }
  const envelope = envelopeSchema.safeParse(json);
  if (!envelope.success) {
    throw new AppError(
      ErrorCodes.PLATFORM_BAD_RESPONSE,
      `platform reply to ${path} is not an envelope {code, message, data}`,
      {
        details: {
          ...where,
          status: statusCode,
          contentType,
          issues: envelope.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`),
        },
        transient: true,
      },
    );
  }
  return envelope.data;
}

/** The envelope's `code` was not 0: carries the platform's own code and message to the caller. */
export class PlatformCodeError extends AppError {
  readonly platformCode: number;
  readonly platformMessage: string;

  constructor(platformCode: number, platformMessage: string, path: string) {
    super(
      ErrorCodes.PLATFORM_ERROR_CODE,
      `platform error ${platformCode} from ${path}: ${platformMessage || '(no message)'}`,
      {
        details: { path, platformCode, platformMessage },
      },
    );
    this.name = 'PlatformCodeError';
    this.platformCode = platformCode;
    this.platformMessage = platformMessage;
  }
}
