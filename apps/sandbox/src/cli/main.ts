import { parseArgs } from 'node:util';
import { coerceError } from '@mcb/core/errors';
import { loadConfig } from '@mcb/core/config';

/**
 * `pnpm sandbox <command>`: drive a running sandbox over its control API, in the style of `stripe trigger`.
 *   trigger payin  --currency INR --amount 1000 [--state 6|3] [options]
 *   trigger payout --currency INR --amount 1000 [--state 4|5] [--console] [options]
 *   order <merchantOrderNo|orderNo>     show an order and every callback attempt
 *   reset                               forget all orders and restore faults
 * Talks to SANDBOX_URL (default http://127.0.0.1:8090).
 */
const USAGE = `usage:
  pnpm sandbox trigger payin  --currency INR --amount 1000 [--state 6|3]
  pnpm sandbox trigger payout --currency INR --amount 1000 [--state 4|5] [--console]
      common options: --merchant-order-no X  --callback-url URL  --duplicate N  --min-blocks N
                      --wait (until delivered or given up; exit 1 if given up)  --timeout 60s  --json
  pnpm sandbox order <merchantOrderNo|orderNo> [--json]
  pnpm sandbox reset
env: SANDBOX_URL (default http://127.0.0.1:8090)`;

const base = loadConfig(process.env, 'cli').SANDBOX_URL.replace(/\/+$/, '');

interface AttemptView {
  number: number;
  copy: number;
  at: string;
  status: number | null;
  bodySnippet: string;
  outcome: string;
  error: string | null;
}
interface DeliveryView {
  id: string;
  event: string;
  state: number;
  url: string;
  status: string;
  attempts: AttemptView[];
  nextAttemptAt: string | null;
}
interface OrderView {
  order: Record<string, unknown> & { orderNo: string; merchantOrderNo: string; state: number };
  deliveries: DeliveryView[];
}

async function call<T>(method: string, path: string, body?: unknown): Promise<T> {
  let res: Response;
  try {
    res = await fetch(`${base}${path}`, {
      method,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(15_000),
    });
  } catch (e) {
    throw new Error(`cannot reach the sandbox at ${base} (${coerceError(e).message}); start it with \`pnpm start:sandbox\``);
  }
  const text = await res.text();
  if (!res.ok) {
    let message = text;
    try {
      message = (JSON.parse(text) as { message?: string }).message ?? text;
    } catch {
      // not JSON: show the text as it is
    }
    throw new Error(`sandbox answered ${res.status}: ${message}`);
  }
  return JSON.parse(text) as T;
}

function describeAttempt(a: AttemptView): string {
  const copy = a.copy > 1 ? ` (copy ${a.copy})` : '';
  const reply = a.status === null ? `no reply: ${a.error}` : `${a.status} ${JSON.stringify(a.bodySnippet)}`;
  return `  attempt ${a.number}${copy} at ${a.at}: ${reply} → ${a.outcome}${a.error && a.status !== null ? ` (${a.error})` : ''}`;
}

function print(view: OrderView): void {
  const o = view.order;
  console.log(`${o.type} ${o.orderNo} (merchant order ${o.merchantOrderNo}): ${o.amount} ${o.currency}, state ${o.state}, created via ${o.createdVia}`);
  if (view.deliveries.length === 0) console.log('  no callback (only pay-in 6 and API payouts 4/5 send one)');
  for (const d of view.deliveries) {
    console.log(`callback ${d.id} [${d.event}, state ${d.state}] → ${d.url}: ${d.status}`);
    for (const a of d.attempts) console.log(describeAttempt(a));
    if (d.nextAttemptAt) console.log(`  next attempt at ${d.nextAttemptAt}`);
  }
}

function durationMs(text: string): number {
  const m = /^(\d+)(ms|s|m)?$/.exec(text);
  if (!m) throw new Error(`--timeout: expected e.g. 30s or 2m (got ${text})`);
  return Number(m[1]) * { ms: 1, s: 1000, m: 60_000 }[(m[2] ?? 's') as 'ms' | 's' | 'm'];
}

async function trigger(kind: string | undefined, args: string[]): Promise<number> {
  if (kind !== 'payin' && kind !== 'payout') {
    console.error(`trigger what? expected payin or payout\n\n${USAGE}`);
    return 2;
  }
  const { values } = parseArgs({
    args,
    options: {
      currency: { type: 'string', default: 'INR' },
      amount: { type: 'string', default: '1000' },
      state: { type: 'string' },
      'merchant-order-no': { type: 'string' },
      'callback-url': { type: 'string' },
      console: { type: 'boolean', default: false },
      duplicate: { type: 'string' },
      'min-blocks': { type: 'string' },
      wait: { type: 'boolean', default: false },
      timeout: { type: 'string', default: '60s' },
      json: { type: 'boolean', default: false },
    },
  });
  const faults: Record<string, number> = {};
  if (values.duplicate) faults.duplicate = Number(values.duplicate);
  if (values['min-blocks']) faults.minBlocks = Number(values['min-blocks']);
  const created = await call<OrderView>('POST', `/control/${kind}s`, {
    currency: values.currency,
    amount: values.amount,
    merchantOrderNo: values['merchant-order-no'],
    callbackUrl: values['callback-url'],
    ...(kind === 'payout' && values.console ? { createdVia: 'console' } : {}),
    ...(Object.keys(faults).length > 0 ? { faults } : {}),
  });
  const state = Number(values.state ?? (kind === 'payin' ? 6 : 4));
  const { order } = created;
  if (!values.json) console.log(`created ${kind} ${order.orderNo} (merchant order ${order.merchantOrderNo}); moving it to state ${state}`);
  const finalized = await call<OrderView>('POST', `/control/orders/${encodeURIComponent(order.orderNo)}/finalize`, { state });

  // Wait for the receiver's first reply (or, with --wait, for the end of the delivery).
  const deadline = Date.now() + durationMs(values.timeout);
  let view: OrderView = finalized;
  const done = (v: OrderView) =>
    v.deliveries.every((d) => (values.wait ? ['delivered', 'gave-up', 'cancelled'].includes(d.status) : d.attempts.length > 0 || d.status !== 'scheduled'));
  while (!done(view) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 200));
    view = await call<OrderView>('GET', `/control/orders/${encodeURIComponent(order.orderNo)}`);
  }
  if (values.json) console.log(JSON.stringify(view, null, 2));
  else print(view);
  if (!done(view)) {
    console.error(`still waiting after ${values.timeout}; see \`pnpm sandbox order ${order.merchantOrderNo}\``);
    return 1;
  }
  return values.wait && view.deliveries.some((d) => d.status === 'gave-up') ? 1 : 0;
}

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case 'trigger':
      return trigger(rest[0], rest.slice(1));
    case 'order': {
      const { values, positionals } = parseArgs({ args: rest, allowPositionals: true, options: { json: { type: 'boolean', default: false } } });
      if (!positionals[0]) {
        console.error(USAGE);
        return 2;
      }
      const view = await call<OrderView>('GET', `/control/orders/${encodeURIComponent(positionals[0])}`);
      if (values.json) console.log(JSON.stringify(view, null, 2));
      else print(view);
      return 0;
    }
    case 'reset':
      await call('POST', '/control/reset');
      console.log('sandbox reset');
      return 0;
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      console.log(USAGE);
      return command === undefined ? 2 : 0;
    default:
      console.error(`unknown command "${command}"\n\n${USAGE}`);
      return 2;
  }
}

try {
  process.exitCode = await main(process.argv.slice(2));
} catch (e) {
  console.error(`sandbox: ${coerceError(e).message}`);
  process.exitCode = 1;
}
