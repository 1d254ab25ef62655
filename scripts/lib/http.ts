/** A small JSON client for the local console and sandbox APIs (127.0.0.1 only; no retries). */

/** A non-2xx answer, with the status and the error code the API gave. */
export class HttpError extends Error {
  readonly status: number;
  constructor(message: string, status: number) {
    super(message);
    this.name = 'HttpError';
    this.status = status;
  }
}

/** Options of {@link requestJson}. */
export interface JsonRequest {
  method?: 'GET' | 'POST' | 'PUT';
  body?: unknown;
  /** Sent as `Authorization: Bearer …`. */
  token?: string;
  /** Statuses that count as success besides 2xx (e.g. 409 for "already exists"). */
  accept?: readonly number[];
  /** Per-request deadline, in ms. @defaultValue 10000 */
  timeoutMs?: number;
}

/**
 * Send a JSON request and parse the JSON answer. Error messages carry the method, path, status and the API's error
 * code, never the request body.
 */
export async function requestJson<T>(url: string, opts: JsonRequest = {}): Promise<T> {
  const headers: Record<string, string> = {};
  if (opts.body !== undefined) headers['content-type'] = 'application/json';
  if (opts.token) headers.authorization = `Bearer ${opts.token}`;
  const res = await fetch(url, {
    method: opts.method ?? (opts.body === undefined ? 'GET' : 'POST'),
    headers,
    body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
    signal: AbortSignal.timeout(opts.timeoutMs ?? 10_000),
  });
  const text = await res.text();
  if (!res.ok && !(opts.accept ?? []).includes(res.status)) {
    let code = '';
    try {
      const parsed = JSON.parse(text) as { code?: string; error?: string; message?: string };
      code = `${parsed.code ?? parsed.error ?? ''} ${parsed.message ?? ''}`.trim();
    } catch {
      code = text.slice(0, 80);
    }
    throw new HttpError(
      `${opts.method ?? (opts.body === undefined ? 'GET' : 'POST')} ${new URL(url).pathname}: HTTP ${res.status} ${code}`,
      res.status,
    );
  }
  return (text ? JSON.parse(text) : undefined) as T;
}

/** Run `task` over `items` with at most `limit` in flight; rejects with the first failure. */
export async function forEachLimited<T>(
  items: readonly T[],
  limit: number,
  task: (item: T, index: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  const lanes = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) {
      const i = next++;
      await task(items[i] as T, i);
    }
  });
  await Promise.all(lanes);
}
