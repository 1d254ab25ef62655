import { loadConfig } from '@mcb/core/config';
import { coerceError } from '@mcb/core/errors';
import { terminalJson, terminalLines, terminalText } from './_terminal.ts';

/** The console's HTTP API as the CLI commands call it: the CLI never reads the database for an operator action. */
export interface CliApi {
  readonly url: string;
  call<T>(method: 'GET' | 'POST', path: string, body?: unknown): Promise<{ status: number; body: T }>;
}

/**
 * The API at CONSOLE_URL (else CONSOLE_HOST:CONSOLE_PORT) with CONSOLE_OPERATOR_TOKEN (else CONSOLE_TOKEN), read
 * from the environment or .env (`pnpm cli` loads it). Throws when no token is set, saying which variable to set.
 */
export function cliApi(env: Record<string, string | undefined>): CliApi {
  const config = loadConfig(env, 'cli');
  const token = config.CONSOLE_OPERATOR_TOKEN ?? config.CONSOLE_TOKEN;
  if (!token)
    throw new Error(
      'no token: set CONSOLE_OPERATOR_TOKEN to your operator token (or CONSOLE_TOKEN for the admin) in the environment or .env',
    );
  const host = config.CONSOLE_HOST === '0.0.0.0' ? '127.0.0.1' : config.CONSOLE_HOST;
  const url = (config.CONSOLE_URL ?? `http://${host}:${config.CONSOLE_PORT}`).replace(/\/+$/, '');
  return {
    url,
    async call<T>(method: 'GET' | 'POST', path: string, body?: unknown) {
      let res: Response;
      try {
        res = await fetch(`${url}${path}`, {
          method,
          headers: {
            authorization: `Bearer ${token}`,
            ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          },
          body: body === undefined ? undefined : JSON.stringify(body),
          signal: AbortSignal.timeout(60_000),
        });
      } catch (e) {
        throw new Error(
          `cannot reach the console at ${url} (${coerceError(e).message}); set CONSOLE_URL, or start it (pnpm dev)`,
        );
      }
      const text = await res.text();
      let parsed: unknown = text;
      try {
        parsed = JSON.parse(text);
      } catch {
        // not JSON: keep the text
      }
      return { status: res.status, body: parsed as T };
    },
  };
}

/** The console's error body in one line (code, message, the role it needs, each field's problem). */
export function describeRefusal(status: number, body: unknown): string {
  const b = (body ?? {}) as {
    code?: string;
    message?: string;
    requiredRole?: string;
    errors?: { field: string; message: string }[];
  };
  const problems = b.errors?.map((e) => `${e.field}: ${e.message}`).join('; ');
  const role = b.requiredRole ? ` (needs the role ${b.requiredRole})` : '';
  return terminalText(
    `${status} ${b.code ?? ''} ${b.message ?? String(body)}${role}${problems ? ` [${problems}]` : ''}`
      .replace(/[ \t\n\r\f\v\u2028\u2029]+/g, ' ')
      .trim(),
  );
}

/**
 * Print the console's answer: its JSON with --json, else `render`; a refusal on stderr. Returns the exit status. What
 * `render` returns should escape each stored value itself (_terminal.ts); a control or bidi character it let through
 * is escaped here all the same, and the JSON's are written as `\uXXXX`.
 */
export function answer<T>(
  res: { status: number; body: T },
  json: boolean | undefined,
  render: (body: T) => string,
): number {
  if (res.status >= 400) {
    console.error(describeRefusal(res.status, res.body));
    return 1;
  }
  console.log(json ? terminalJson(res.body) : terminalLines(render(res.body)).join('\n'));
  return 0;
}

/** `2026-11-24 03:02:11` from an ISO instant (UTC, as the logs). */
export const at = (iso: string | null | undefined) => (iso ? iso.slice(0, 19).replace('T', ' ') : '-');
