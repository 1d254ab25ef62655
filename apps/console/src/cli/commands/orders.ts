import { parseArgs } from 'node:util';
import type { OrderDetail } from '../../orders/queries.ts';
import { answer, at, cliApi } from './_api.ts';
import { indentedValue, table, terminalText } from './_terminal.ts';

export const summary =
  'an order with its ledger, open review and callback timeline: orders get <merchantOrderNo> [--merchant REF] [--json]';

const USAGE = `usage: pnpm cli orders get <merchantOrderNo> [--merchant REF] [--json]
  The order as GET /api/orders/{no} answers it: status, amount, ledger, open review, and its timeline.
  --merchant REF  whose order (MERCHANTS_FILE's ref): needed when two merchants hold the number (409 MERCHANT_REQUIRED)`;

/** `?merchant=REF` when one is given. */
const merchantQuery = (ref: string | undefined) => (ref ? `?merchant=${encodeURIComponent(ref)}` : '');

export function renderOrder(o: OrderDetail): string {
  const lines = [
    terminalText(
      `order ${o.merchant ? `${o.merchant}/` : ''}${o.merchantOrderNo}  ${o.kind}  ${o.status.toUpperCase()}  ${o.amount} ${o.currency}  ` +
        `platform ${o.platformOrderNo ?? '(not known yet)'}`,
    ),
    o.review ? indentedValue(`open review since ${at(o.review.at)}: `, o.review.reason, '    ') : 'no open review',
    '',
    'ledger:',
    ...(o.ledger.length === 0
      ? ['  nothing posted']
      : o.ledger.map((l) => terminalText(`  ${at(l.createdAt)}  ${l.entryType}  ${l.amount} ${l.currency}`))),
    '',
    'timeline (UTC, oldest first):',
  ];
  if (o.timeline.length === 0) lines.push('  no callback recorded');
  else {
    const rows = [['when', 'event', 'order/state', 'job#attempt', 'code', 'detail']];
    for (const e of o.timeline) {
      rows.push([
        at(e.at),
        e.event,
        `${e.orderNo ?? '-'}/${e.state ?? '-'}`,
        `${e.jobId ?? '-'}${e.attempt !== null ? `#${e.attempt}` : ''}`,
        e.code ?? '-',
        e.detail,
      ]);
    }
    lines.push(...table(rows).map((l) => `  ${l}`));
  }
  return lines.join('\n');
}

export async function run(args: string[], env: Record<string, string | undefined> = {}): Promise<number> {
  let parsed: ReturnType<
    typeof parseArgs<{
      options: { json: { type: 'boolean' }; help: { type: 'boolean' }; merchant: { type: 'string' } };
      allowPositionals: true;
    }>
  >;
  try {
    parsed = parseArgs({
      args,
      options: { json: { type: 'boolean' }, help: { type: 'boolean' }, merchant: { type: 'string' } },
      allowPositionals: true,
    });
  } catch (e) {
    console.error(`${(e as Error).message}\n${USAGE}`);
    return 2;
  }
  const [sub, no, ...rest] = parsed.positionals;
  if (parsed.values.help) {
    console.log(USAGE);
    return 0;
  }
  if (sub !== 'get' || !no || rest.length > 0) {
    console.error(USAGE);
    return 2;
  }
  const api = cliApi(env);
  return answer(
    await api.call<OrderDetail>('GET', `/api/orders/${encodeURIComponent(no)}${merchantQuery(parsed.values.merchant)}`),
    parsed.values.json,
    renderOrder,
  );
}
