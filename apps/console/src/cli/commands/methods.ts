import { parseArgs } from 'node:util';
import type { CatalogView, MethodEntry } from '@mcb/core/catalog';
import { openCatalog, reportCatalogFailure } from './_catalog.ts';
import { table, terminalJson, terminalText } from './_terminal.ts';

export const summary = 'print the payment-method catalog as a table: methods [--currency PHP] [--refresh] [--json]';

const USAGE = `usage: pnpm cli methods [--currency CODE] [--refresh] [--json]
  --currency CODE  only this currency
  --refresh        ask the platform now instead of using a young cached copy (no fallback)
  --json           print the catalog as JSON`;

function methodLines(m: MethodEntry): string[] {
  const lines = [terminalText(`  method ${m.paymentMethod}  ${m.name}  (${m.kind})`)];
  if (m.fields.length === 0) lines.push('    (no fields)');
  else {
    const rows = [['key', 'apiParam', 'required', 'pattern', 'label', 'hint']];
    for (const f of m.fields) {
      rows.push([
        f.key,
        f.apiParam || '(none: not via API)',
        f.required ? 'yes' : 'no',
        f.pattern || '-',
        f.label || '-',
        f.hint || '-',
      ]);
    }
    lines.push(...table(rows).map((l) => `    ${l}`));
  }
  if (m.banks !== undefined) {
    const banks = m.banks.map((b) => `${b.name} (${b.code})`).join(', ');
    lines.push(`    banks (${m.banks.length}, bankName must be one of these names): ${terminalText(banks) || 'none'}`);
  }
  return lines;
}

const STALE = '  STALE: the platform could not be asked; this is the last good copy';
const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;

/** The catalog as readable text: a header with its age, then each currency and its methods. */
export function renderCatalog(view: CatalogView): string {
  const lines = [`catalog fetched ${view.fetchedAt.toISOString()} (${view.ageSeconds}s ago)${view.stale ? STALE : ''}`];
  if (view.catalog.currencies.length === 0) lines.push('', 'no currencies');
  for (const c of view.catalog.currencies) {
    lines.push(
      '',
      terminalText(
        `${c.currency}  ${c.symbol}  ${plural(c.decimals, 'decimal')}  ${plural(c.methods.length, 'method')}`,
      ),
    );
    for (const m of c.methods) lines.push(...methodLines(m));
  }
  return lines.join('\n');
}

export async function run(args: string[], env: Record<string, string | undefined> = {}): Promise<number> {
  let values: { currency?: string; refresh?: boolean; json?: boolean; help?: boolean };
  try {
    ({ values } = parseArgs({
      args,
      options: {
        currency: { type: 'string' },
        refresh: { type: 'boolean' },
        json: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    }));
  } catch (e) {
    console.error(`${(e as Error).message}\n${USAGE}`);
    return 2;
  }
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  const { catalog, close } = openCatalog(env);
  try {
    const options = { currency: values.currency };
    const view = values.refresh ? await catalog.refresh(options) : await catalog.get(options);
    console.log(
      values.json
        ? terminalJson({ ...view.catalog, fetchedAt: view.fetchedAt, ageSeconds: view.ageSeconds, stale: view.stale })
        : renderCatalog(view),
    );
    return 0;
  } catch (e) {
    return reportCatalogFailure(e);
  } finally {
    await close();
  }
}
