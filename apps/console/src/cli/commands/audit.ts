import { parseArgs } from 'node:util';
import type { AuditPage } from '../../audit/queries.ts';
import { answer, at, cliApi } from './_api.ts';
import { table } from './_terminal.ts';

export const summary =
  'the audit trail: audit [--merchant REF] [--operator NAME] [--action A] [--target T] [--from ISO] [--to ISO] ' +
  '[--services hide|show|only] [--limit N] [--before ID] [--json]';

const USAGE = `usage: pnpm cli audit [--merchant REF] [--operator NAME] [--action reviews.reverify] [--target review:42] \
[--from 2026-11-24T00:00:00Z] [--to ISO] [--services hide|show|only] [--limit N] [--before ID] [--json]
  Newest first. An admin reads everyone's actions; others read their own. Rows of service clients (the shop
  registering orders) are left out unless --services show (with them) or only (them alone).`;

const OPTIONS = {
  merchant: { type: 'string' },
  operator: { type: 'string' },
  action: { type: 'string' },
  target: { type: 'string' },
  from: { type: 'string' },
  to: { type: 'string' },
  services: { type: 'string' },
  limit: { type: 'string' },
  before: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean' },
} as const;

export function renderAudit(page: AuditPage): string {
  if (page.entries.length === 0) return 'no actions recorded';
  // Each cell is escaped by table(); a reason that spans lines prints as indented continuation lines under it.
  // The merchant column once the console serves two merchants or more (the rows then carry it).
  const named = page.entries.some((e) => e.merchant !== undefined);
  const rows = [
    ['when (UTC)', ...(named ? ['merchant'] : []), 'operator', 'role', 'via', 'action', 'target', 'outcome', 'reason'],
  ];
  for (const e of page.entries)
    rows.push([
      at(e.at),
      ...(named ? [e.merchant ?? '-'] : []),
      e.operator,
      e.role,
      e.via ?? '-',
      e.action,
      e.target,
      e.outcome,
      e.reason || '(none)',
    ]);
  return [...table(rows), ...(page.nextBefore !== null ? [`(more: --before ${page.nextBefore})`] : [])].join('\n');
}

export async function run(args: string[], env: Record<string, string | undefined> = {}): Promise<number> {
  let parsed: ReturnType<typeof parseArgs<{ options: typeof OPTIONS; allowPositionals: false }>>;
  try {
    parsed = parseArgs({ args, options: OPTIONS, allowPositionals: false });
  } catch (e) {
    console.error(`${(e as Error).message}\n${USAGE}`);
    return 2;
  }
  const { json, help, ...filters } = parsed.values;
  if (help) {
    console.log(USAGE);
    return 0;
  }
  const q = new URLSearchParams(Object.entries(filters).filter((e): e is [string, string] => typeof e[1] === 'string'));
  return answer(await cliApi(env).call<AuditPage>('GET', `/api/audit${q.size ? `?${q}` : ''}`), json, renderAudit);
}
