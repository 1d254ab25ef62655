import { parseArgs } from 'node:util';
import type { MerchantPauseView } from '../../merchants/pause.ts';
import { answer, at, cliApi } from './_api.ts';
import { indentedValue, terminalText } from './_terminal.ts';

/** `pnpm cli merchants pause|resume` (docs/merchants.md "Pausing a merchant"): the API's pause and resume. */
export const PAUSE_USAGE = `usage: pnpm cli merchants pause <ref> --reason "why" [--json]
       pnpm cli merchants resume <ref> --reason "why" [--json]
  A paused merchant's callbacks are acknowledged and stored but not credited; its sweep and replays wait. Role
  operator; the reason is recorded in the audit trail with your name (CONSOLE_OPERATOR_TOKEN).`;

const OPTIONS = { reason: { type: 'string' }, json: { type: 'boolean' }, help: { type: 'boolean' } } as const;

/** A merchant's pause state in a line or two, every stored value escaped for the terminal. */
export function renderPause(v: MerchantPauseView): string {
  if (!v.paused) return terminalText(`merchant ${v.merchant} (${v.merchantNo}) RUNNING`);
  return [
    terminalText(`merchant ${v.merchant} (${v.merchantNo}) PAUSED by ${v.pausedBy ?? '?'} since ${at(v.since)}`),
    indentedValue('  why: ', v.reason ?? '', '    '),
  ].join('\n');
}

/** Run `merchants pause|resume <ref> --reason ...`; the exit status (2 for a usage error). */
export async function runMerchantPause(
  verb: 'pause' | 'resume',
  args: string[],
  env: Record<string, string | undefined>,
): Promise<number> {
  let parsed: ReturnType<typeof parseArgs<{ options: typeof OPTIONS; allowPositionals: true }>>;
  try {
    parsed = parseArgs({ args, options: OPTIONS, allowPositionals: true });
  } catch (e) {
    console.error(`${(e as Error).message}\n${PAUSE_USAGE}`);
    return 2;
  }
  const { values: v, positionals } = parsed;
  if (v.help) {
    console.log(PAUSE_USAGE);
    return 0;
  }
  const [ref, ...rest] = positionals;
  if (!ref || rest.length > 0) {
    console.error(PAUSE_USAGE);
    return 2;
  }
  // The reason is sent as given (even absent): the console refuses an action without one, in one place.
  const res = await cliApi(env).call<MerchantPauseView>('POST', `/api/merchants/${encodeURIComponent(ref)}/${verb}`, {
    reason: v.reason,
  });
  return answer(res, v.json, (b) => `${verb === 'pause' ? 'paused' : 'resumed'}: ${renderPause(b)}`);
}
