/**
 * The merchant's side as `pnpm sandbox trigger` sees it: our console's API over HTTP (never its code), to register
 * the order a triggered callback is about, as a merchant's system would, and to follow it until it is settled.
 */
import { coerceError } from '@mcb/core/errors';

export interface ConsoleApi {
  readonly url: string;
  call<T>(method: string, path: string, body?: unknown): Promise<{ status: number; body: T }>;
}

export function consoleApi(url: string, token: string): ConsoleApi {
  return {
    url,
    async call<T>(method: string, path: string, body?: unknown) {
      let res: Response;
      try {
        res = await fetch(`${url}${path}`, {
          method,
          headers: {
            authorization: `Bearer ${token}`,
            ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          },
          body: body === undefined ? undefined : JSON.stringify(body),
          signal: AbortSignal.timeout(15_000),
        });
      } catch (e) {
        throw new Error(
          `cannot reach our console at ${url} (${coerceError(e).message}); is \`pnpm dev\` running? (or pass --unregistered)`,
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

/** The console's error body, in one line. */
export function describeError(status: number, body: unknown): string {
  const b = body as { code?: string; message?: string; errors?: { field: string; message: string }[] };
  const problems = b?.errors?.map((e) => `${e.field}: ${e.message}`).join('; ');
  return `${status} ${b?.code ?? ''} ${b?.message ?? String(body)}${problems ? ` (${problems})` : ''}`.trim();
}

interface CatalogField {
  key: string;
  apiParam: string;
  required: boolean;
  pattern: string;
}
interface CatalogMethod {
  paymentMethod: number;
  name: string;
  fields: CatalogField[];
  banks?: { name: string; code: string }[];
}

/** Sample values tried, in order, for a field of a catalog method: the first its pattern accepts is used. */
const SAMPLES = [
  'Test Customer',
  '123456789012',
  'SBIN0001234',
  '09171234567',
  '+639171234567',
  'test@example.com',
  '1234567890',
  'ABCD1234',
  'test',
];

/**
 * A payout the catalog accepts for `currency`: the first method every required field of which can be filled through
 * the API with a sample value (or a value given with --param), bank fields with the method's first bank.
 */
export function samplePayout(
  methods: CatalogMethod[],
  given: Record<string, string>,
): { paymentMethod: number; name: string; params: Record<string, string> } | { problem: string } {
  const problems: string[] = [];
  for (const m of methods) {
    const params: Record<string, string> = {};
    let ok = true;
    for (const f of m.fields) {
      if (!f.required && given[f.key] === undefined) continue;
      if (!f.apiParam) {
        ok = false;
        problems.push(`method ${m.paymentMethod}: ${f.key} cannot be sent through the API`);
        break;
      }
      const value =
        given[f.key] ??
        (f.apiParam === 'bankName' && m.banks?.length
          ? m.banks[0]!.name
          : SAMPLES.find((s) => !f.pattern || new RegExp(f.pattern).test(s)));
      if (value === undefined) {
        ok = false;
        problems.push(
          `method ${m.paymentMethod}: no sample value matches ${f.key} (${f.pattern}); pass --param ${f.key}=...`,
        );
        break;
      }
      params[f.key] = value;
    }
    if (ok) return { paymentMethod: m.paymentMethod, name: m.name, params };
  }
  return { problem: problems.join('; ') || 'the catalog lists no payout method for this currency' };
}
