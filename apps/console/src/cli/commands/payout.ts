import { parseArgs } from 'node:util';
import { validatePayout } from '@mcb/core/catalog';
import { openCatalog, reportCatalogFailure } from './_catalog.ts';

export const summary =
  'validate a payout against the catalog: payout validate --currency PHP --amount 100.00 --method 1 --param key=value ...';

const USAGE = `usage: pnpm cli payout validate --currency CODE --amount DECIMAL --method N [--param key=value ...] [--json]
  --param key=value  a field value, keyed by the catalog field's key (repeat for each field)
  --json             print the result as JSON
exit status: 0 valid (prints the create-payout parameters keyed by apiParam), 1 invalid or failed, 2 usage`;

/** `key=value` pairs into a record; the value may contain '='. */
export function parseParams(pairs: string[]): { params: Record<string, string> } | { error: string } {
  const params: Record<string, string> = {};
  for (const pair of pairs) {
    const eq = pair.indexOf('=');
    if (eq <= 0) return { error: `--param expects key=value, got ${JSON.stringify(pair)}` };
    const key = pair.slice(0, eq);
    if (Object.hasOwn(params, key)) return { error: `--param ${key} given twice` };
    params[key] = pair.slice(eq + 1);
  }
  return { params };
}

export async function run(args: string[], env: Record<string, string | undefined> = {}): Promise<number> {
  const [sub, ...rest] = args;
  if (sub !== 'validate') {
    console.error(
      sub === undefined || sub === '--help' || sub === '-h' ? USAGE : `unknown subcommand "${sub}"\n${USAGE}`,
    );
    return sub === '--help' || sub === '-h' ? 0 : 2;
  }
  let values: { currency?: string; amount?: string; method?: string; param?: string[]; json?: boolean };
  try {
    ({ values } = parseArgs({
      args: rest,
      options: {
        currency: { type: 'string' },
        amount: { type: 'string' },
        method: { type: 'string' },
        param: { type: 'string', multiple: true },
        json: { type: 'boolean' },
      },
    }));
  } catch (e) {
    console.error(`${(e as Error).message}\n${USAGE}`);
    return 2;
  }
  const missing = (['currency', 'amount', 'method'] as const).filter((k) => !values[k]);
  if (missing.length > 0) {
    console.error(`missing ${missing.map((m) => `--${m}`).join(', ')}\n${USAGE}`);
    return 2;
  }
  if (!/^-?\d{1,9}$/.test(values.method!)) {
    console.error(`--method expects the catalog's method number, got ${JSON.stringify(values.method)}`);
    return 2;
  }
  const parsed = parseParams(values.param ?? []);
  if ('error' in parsed) {
    console.error(parsed.error);
    return 2;
  }

  const { catalog, close } = openCatalog(env);
  try {
    const view = await catalog.get({ currency: values.currency });
    const result = validatePayout(view.catalog, {
      currency: values.currency!,
      amount: values.amount!,
      paymentMethod: Number(values.method),
      params: parsed.params,
    });
    const age = `catalog ${view.ageSeconds}s old${view.stale ? ', STALE (platform unreachable)' : ''}`;
    if (values.json) {
      console.log(
        JSON.stringify(
          { ...result, catalog: { fetchedAt: view.fetchedAt, ageSeconds: view.ageSeconds, stale: view.stale } },
          null,
          2,
        ),
      );
    } else if (result.ok) {
      console.log(`valid (${age}); create-payout parameters:`);
      for (const [k, v] of Object.entries(result.apiParams)) console.log(`  ${k}=${v}`);
    } else {
      console.log(`invalid (${age}): ${result.errors.length} problem${result.errors.length === 1 ? '' : 's'}`);
      for (const e of result.errors) console.log(`  ${e.field}: ${e.message}`);
    }
    return result.ok ? 0 : 1;
  } catch (e) {
    return reportCatalogFailure(e);
  } finally {
    await close();
  }
}
