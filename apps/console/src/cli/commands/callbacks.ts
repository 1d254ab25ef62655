import { parseArgs } from 'node:util';
import { cliApi, describeRefusal } from './_api.ts';
import { table, terminalJson, terminalText } from './_terminal.ts';
import { FILTER_OPTIONS, FILTER_USAGE, filterOf, filterQuery } from './_filter.ts';

export const summary =
  'search callbacks: callbacks search --merchant-order-no MO-1 | --status failed --from ... [--json]';

const USAGE = `usage: pnpm cli callbacks search [filter] [--limit N] [--cursor C | --all] [--timeline] [--json]
${FILTER_USAGE}
  --limit N      rows per page (1-200, default 50)
  --cursor C     the next page (printed after each page)
  --all          follow the cursor to the last page
  --timeline     with an order number: print the order's callback timeline too
  --json         the API's JSON, one page per line
needs CONSOLE_OPERATOR_TOKEN (or CONSOLE_TOKEN) and CONSOLE_URL (or CONSOLE_HOST/CONSOLE_PORT), from the environment or .env
exit status: 0 found something, 3 nothing matched, 1 refused or failed, 2 usage`;

interface Row {
  jobId: string;
  kind: string;
  orderNo: string;
  state: number;
  merchantOrderNo: string;
  merchant?: string;
  merchantNo?: string;
  amount: string | null;
  receivedAt: string;
  attempts: number;
  status: string;
  outcome: string | null;
  code: string | null;
  appliedAt: string | null;
}
interface Page {
  callbacks: Row[];
  nextCursor: string | null;
  timeline: { at: string; event: string; detail: string }[];
}

/** A refusal of the console in one line on stderr (exit status 1). */
function refused(res: { status: number; body: unknown }): number {
  console.error(describeRefusal(res.status, res.body));
  return 1;
}

export async function run(args: string[], env: Record<string, string | undefined> = {}): Promise<number> {
  const [sub, ...rest] = args;
  if (sub !== 'search') {
    console.error(
      sub === undefined || sub === '--help' || sub === '-h' ? USAGE : `unknown subcommand "${sub}"\n${USAGE}`,
    );
    return sub === '--help' || sub === '-h' ? 0 : 2;
  }
  let values: ReturnType<typeof parse>['values'];
  const parse = (a: string[]) =>
    parseArgs({
      args: a,
      options: {
        ...FILTER_OPTIONS,
        limit: { type: 'string' },
        cursor: { type: 'string' },
        all: { type: 'boolean' },
        timeline: { type: 'boolean' },
        json: { type: 'boolean' },
      },
    });
  try {
    ({ values } = parse(rest));
  } catch (e) {
    console.error(`${(e as Error).message}\n${USAGE}`);
    return 2;
  }
  const filter = filterOf(values);
  if (Object.keys(filter).length === 0) {
    console.error(`give at least one filter\n${USAGE}`);
    return 2;
  }
  const api = cliApi(env);
  let cursor = values.cursor;
  let found = 0;
  for (let first = true; ; first = false) {
    const query = filterQuery(filter, {
      ...(values.limit ? { limit: values.limit } : {}),
      ...(cursor ? { cursor } : {}),
    });
    const res = await api.call<Page>('GET', `/api/callbacks?${query}`);
    if (res.status !== 200) return refused(res);
    const page = res.body;
    found += page.callbacks.length;
    if (values.json) console.log(terminalJson(page, 0));
    else {
      if (page.callbacks.length > 0) {
        // The merchant column once the console serves two merchants or more (the rows then carry it).
        const named = page.callbacks.some((c) => c.merchant !== undefined);
        console.log(
          table([
            [
              'received',
              'status',
              'kind',
              ...(named ? ['merchant'] : []),
              'merchant order',
              'platform order',
              'state',
              'amount',
              'tries',
              'code / outcome',
              'job',
            ],
            ...page.callbacks.map((c) => [
              c.receivedAt,
              c.status,
              c.kind,
              ...(named ? [c.merchant ?? c.merchantNo ?? '-'] : []),
              c.merchantOrderNo,
              c.orderNo,
              String(c.state),
              c.amount ?? '-',
              String(c.attempts),
              c.code ?? c.outcome ?? '',
              c.jobId,
            ]),
          ]).join('\n'),
        );
      } else if (first) console.log('no callback matched');
      if (first && values.timeline && page.timeline.length > 0) {
        console.log('\ntimeline:');
        for (const e of page.timeline) console.log(terminalText(`  ${e.at}  ${e.event.padEnd(16)} ${e.detail}`));
      }
    }
    cursor = page.nextCursor ?? undefined;
    if (!cursor) break;
    if (!values.all) {
      if (!values.json) console.log(`more: --cursor ${cursor}`);
      break;
    }
  }
  return found > 0 ? 0 : 3;
}
