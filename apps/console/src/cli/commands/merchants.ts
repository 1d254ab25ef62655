import { parseArgs } from 'node:util';
import type { MerchantFigures } from '../../merchants/queries.ts';
import { answer, at, cliApi } from './_api.ts';
import { PAUSE_USAGE, runMerchantPause } from './_merchant-pause.ts';
import { table } from './_terminal.ts';

export const summary = "each merchant's figures, pause and resume: merchants list | pause <ref> | resume <ref>";

const USAGE = `usage: pnpm cli merchants list [--json]
  One row per merchant: paused or not, its queue (waiting, delayed, failed, in flight), credits in the last minute and
  hour, callback-to-credit p99, Get order p99 and error rate, breaker, Get order budget and use (GET /api/merchants).
  "-": not known (no worker reporting, or Redis away).
${PAUSE_USAGE}`;

const OPTIONS = { json: { type: 'boolean' }, help: { type: 'boolean' } } as const;

const n = (v: number | null) => (v === null ? '-' : String(v));
const ms = (v: number | null) => (v === null ? '-' : `${v} ms`);

export function renderMerchants(body: { merchants: MerchantFigures[] }): string {
  if (body.merchants.length === 0) return 'no merchant to show';
  const rows = [
    [
      'ref',
      'merchant no',
      'state',
      'wait',
      'delay',
      'fail',
      'active',
      'cr/1m',
      'cr/1h',
      'cb→cr p99',
      'GO p99',
      'GO err',
      'breaker',
      'GO use',
      'needs a person',
    ],
  ];
  for (const f of body.merchants)
    rows.push([
      f.ref,
      f.merchantNo,
      f.paused ? `paused by ${f.paused.by} since ${at(f.paused.since)}: ${f.paused.reason}` : 'running',
      n(f.waiting),
      n(f.delayed),
      n(f.failed),
      n(f.active),
      n(f.creditsLastMinute),
      n(f.creditsLastHour),
      ms(f.creditP99Ms),
      ms(f.getOrderP99Ms),
      f.getOrderErrorRate === null ? '-' : `${(f.getOrderErrorRate * 100).toFixed(1)}%`,
      f.breaker ?? '-',
      `${f.getOrderRate === null ? '-' : f.getOrderRate.toFixed(1)}/${f.getOrderRps > 0 ? f.getOrderRps : 'no cap'}`,
      f.attention.length ? f.attention.join('\n') : '-',
    ]);
  return table(rows).join('\n');
}

export async function run(args: string[], env: Record<string, string | undefined> = {}): Promise<number> {
  if (args[0] === 'pause' || args[0] === 'resume') return runMerchantPause(args[0], args.slice(1), env);
  let parsed: ReturnType<typeof parseArgs<{ options: typeof OPTIONS; allowPositionals: true }>>;
  try {
    parsed = parseArgs({ args, options: OPTIONS, allowPositionals: true });
  } catch (e) {
    console.error(`${(e as Error).message}\n${USAGE}`);
    return 2;
  }
  const [sub, ...rest] = parsed.positionals;
  if (parsed.values.help) {
    console.log(USAGE);
    return 0;
  }
  if (sub !== 'list' || rest.length > 0) {
    console.error(`${sub === undefined ? 'a subcommand is required' : `unknown subcommand "${sub}"`}\n${USAGE}`);
    return 2;
  }
  return answer(
    await cliApi(env).call<{ merchants: MerchantFigures[] }>('GET', '/api/merchants'),
    parsed.values.json,
    renderMerchants,
  );
}
