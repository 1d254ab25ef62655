import { parseArgs } from 'node:util';
import { coerceError } from '@mcb/core/errors';
import { loadConfig } from '@mcb/core/config';
import { PayinState, PayoutState, targetStatusOf } from '@mcb/core/spec';
import { consoleApi, describeError, samplePayout, type ConsoleApi } from './merchant.ts';

/**
 * `pnpm sandbox <command>`: drive a running sandbox over its control API, in the style of `stripe trigger`.
 *   trigger payin  --currency INR --amount 1000 [--state 6|3] [options]
 *   trigger payout --currency INR --amount 1000 [--state 4|5] [--console] [options]
 *     registers the order with our console first (POST /api/payins|payouts; --unregistered skips it), finalises it
 *     on the sandbox, then follows it through our console until it is credited / succeeded / refused.
 *   order <merchantOrderNo|orderNo>     show an order and every callback attempt
 *   --merchant REF picks the merchant account (MERCHANTS_FILE's ref) of `trigger` and `order`; default: the first.
 *   reset                               forget all orders and restore faults
 * Talks to SANDBOX_URL (default http://127.0.0.1:8090).
 */
const USAGE = `usage:
  pnpm sandbox trigger payin  --currency INR --amount 1000 [--state 6|3]
  pnpm sandbox trigger payout --currency INR --amount 1000 [--state 4|5] [--console] [--param key=value ...]
      Registers the order with our console first, as a merchant's system would (a payout with a method the
      catalog accepts), then follows it until it is credited / succeeded / refused; exit 1 if it does not end so.
      --unregistered      do not register: the "callback before registration" case (waits for delivery only)
      --forge             also send a forged callback for the order (a pay-in: wrong amount; a payout: the other
                          final state): it must be reviewed, not paid
      --duplicate N       send each callback N times       --stale  a payout callback that Get order contradicts
      --merchant REF      the merchant account (its ref in MERCHANTS_FILE): the sandbox's order, our console's
                          registration and reads are that merchant's; default: the sandbox's first account
      --merchant-order-no X  --callback-url URL  --min-blocks N  --timeout 60s  --json
      --wait              (--unregistered) until delivered or given up; exit 1 if given up
  pnpm sandbox order <merchantOrderNo|orderNo> [--merchant REF] [--json]
  pnpm sandbox reset
env (or .env): SANDBOX_URL (default http://127.0.0.1:8090); CONSOLE_TOKEN, CONSOLE_HOST, CONSOLE_PORT for our console`;

const config = loadConfig(process.env, 'cli');
const base = config.SANDBOX_URL.replace(/\/+$/, '');

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
    throw new Error(
      `cannot reach the sandbox at ${base} (${coerceError(e).message}); start it with \`pnpm start:sandbox\``,
    );
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
  const why = a.error && a.status !== null ? ` (${a.error})` : '';
  return `  attempt ${a.number}${copy} at ${a.at}: ${reply} → ${a.outcome}${why}`;
}

function print(view: OrderView): void {
  const o = view.order;
  // The account is named when the sandbox simulates several (the one account of a default sandbox is `default`).
  const account = typeof o.merchant === 'string' && o.merchant !== 'default' ? `merchant ${o.merchant}, ` : '';
  console.log(
    `${o.type} ${o.orderNo} (${account}merchant order ${o.merchantOrderNo}): ${o.amount} ${o.currency}, ` +
      `state ${o.state}, created via ${o.createdVia}`,
  );
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

function parseTriggerArgs(args: string[]) {
  return parseArgs({
    args,
    options: {
      currency: { type: 'string', default: 'INR' },
      merchant: { type: 'string' },
      amount: { type: 'string', default: '1000' },
      state: { type: 'string' },
      'merchant-order-no': { type: 'string' },
      'callback-url': { type: 'string' },
      console: { type: 'boolean', default: false },
      duplicate: { type: 'string' },
      'min-blocks': { type: 'string' },
      stale: { type: 'boolean', default: false },
      forge: { type: 'boolean', default: false },
      unregistered: { type: 'boolean', default: false },
      param: { type: 'string', multiple: true, default: [] },
      wait: { type: 'boolean', default: false },
      timeout: { type: 'string', default: '60s' },
      json: { type: 'boolean', default: false },
    },
  }).values;
}

/** One `trigger`: what was asked, and where it stands. */
interface TriggerRun {
  kind: 'payin' | 'payout';
  values: ReturnType<typeof parseTriggerArgs>;
  /** `--param key=value` pairs. */
  given: Record<string, string>;
  merchantOrderNo: string;
  /** The state the sandbox moves the order to. */
  state: number;
  /** What our console should end at. */
  expected: string;
  deadline: number;
  /** Print a step of the story, with the time since the start (unless --json). */
  step: (text: string) => void;
  /** Our console; undefined with --unregistered. */
  api: ReturnType<typeof merchantConsole> | undefined;
}

type SandboxOrderView = OrderView['order'];

async function trigger(kind: string | undefined, args: string[]): Promise<number> {
  if (kind !== 'payin' && kind !== 'payout') {
    console.error(`trigger what? expected payin or payout\n\n${USAGE}`);
    return 2;
  }
  const run = triggerRun(kind, args);
  if (typeof run === 'number') return run;
  // 1. Register with our console, as the merchant's system does before sending the customer to pay.
  if (run.api) await registerWithConsole(run, run.api);
  // 2. The platform's side: create the order on the sandbox and move it to its final state.
  const order = await createOnSandbox(run);
  // 3. Follow the callback: its delivery on the sandbox, then (registered) the order in our console.
  const followed = await follow(run, order);
  if (!run.api) return reportDelivery(run, followed.view, order);
  return reportCredit(run, run.api, order, followed);
}

/** The run the arguments ask for, or the exit code of a usage error. */
function triggerRun(kind: 'payin' | 'payout', args: string[]): TriggerRun | number {
  const values = parseTriggerArgs(args);
  const given: Record<string, string> = {};
  for (const p of values.param) {
    const eq = p.indexOf('=');
    if (eq < 1) {
      console.error(`--param expects key=value (got ${p})`);
      return 2;
    }
    given[p.slice(0, eq)] = p.slice(eq + 1);
  }
  const state = Number(values.state ?? (kind === 'payin' ? PayinState.Released : PayoutState.Succeeded));
  // What our console should end at; a state that is not final (or sends no callback) leaves it pending.
  const expected = targetStatusOf(kind, state) ?? 'pending';
  const deadline = Date.now() + durationMs(values.timeout);
  const started = Date.now();
  const step = (text: string) => {
    if (!values.json) console.log(`+${String(Date.now() - started).padStart(6)} ms  ${text}`);
  };
  const merchantOrderNo =
    values['merchant-order-no'] ??
    `T${Date.now().toString(36).toUpperCase()}${Math.random().toString(36).slice(2, 6).toUpperCase()}`;
  const api = values.unregistered ? undefined : merchantConsole();
  return { kind, values, given, merchantOrderNo, state, expected, deadline, step, api };
}

/** Register the order with our console (a payout with a method its catalog accepts). */
async function registerWithConsole(run: TriggerRun, api: ConsoleApi): Promise<void> {
  const { kind, values, merchantOrderNo } = run;
  const body: Record<string, unknown> = {
    merchantOrderNo,
    currency: values.currency,
    amount: values.amount,
    ...(values.merchant === undefined ? {} : { merchant: values.merchant }),
    reason: 'sandbox trigger: test order',
  };
  if (kind === 'payout') {
    const catalog = await api.call<{ currencies?: { methods: Parameters<typeof samplePayout>[0] }[] }>(
      'GET',
      `/api/payment-methods?currency=${encodeURIComponent(values.currency)}${merchantParam(run, '&')}`,
    );
    if (catalog.status !== 200)
      throw new Error(`our console's catalog: ${describeError(catalog.status, catalog.body)}`);
    const chosen = samplePayout(catalog.body.currencies?.[0]?.methods ?? [], run.given);
    if ('problem' in chosen)
      throw new Error(`no payout method of ${values.currency} can be filled in: ${chosen.problem}`);
    Object.assign(body, { paymentMethod: chosen.paymentMethod, params: chosen.params });
  }
  const registered = await api.call('POST', `/api/${kind}s`, body);
  if (registered.status !== 201 && registered.status !== 200)
    throw new Error(`registering with our console: ${describeError(registered.status, registered.body)}`);
  const method = kind === 'payout' ? ` (method ${String(body.paymentMethod)})` : '';
  run.step(
    `registered ${kind} ${merchantOrderNo} (${values.amount} ${values.currency}` +
      `${values.merchant === undefined ? '' : `, merchant ${values.merchant}`}) ` +
      `with our console at ${api.url}${method}`,
  );
}

/** Create the order on the sandbox, move it to its state, and (--forge) send a forged callback for it too. */
async function createOnSandbox(run: TriggerRun): Promise<SandboxOrderView> {
  const { kind, values, state, step } = run;
  const faults: Record<string, number | boolean> = {};
  if (values.duplicate) faults.duplicate = Number(values.duplicate);
  if (values['min-blocks']) faults.minBlocks = Number(values['min-blocks']);
  if (values.stale) faults.stale = true;
  const created = await call<OrderView>('POST', `/control/${kind}s`, {
    ...(values.merchant === undefined ? {} : { merchant: values.merchant }),
    currency: values.currency,
    amount: values.amount,
    merchantOrderNo: run.merchantOrderNo,
    callbackUrl: values['callback-url'],
    ...(kind === 'payout' && values.console ? { createdVia: 'console' } : {}),
    ...(Object.keys(faults).length > 0 ? { faults } : {}),
  });
  const { order } = created;
  await call<OrderView>('POST', `/control/orders/${encodeURIComponent(order.orderNo)}/finalize`, { state });
  step(`sandbox order ${order.orderNo} moved to state ${state}`);
  if (values.forge) {
    // A payout record carries no amount: its forgery claims the final state the payout did not reach.
    const what = kind === 'payout' ? 'state' : 'amount';
    await call('POST', '/control/forge', { what, ref: order.orderNo, merchant: values.merchant });
    step(
      kind === 'payout'
        ? 'sent a forged callback (the other final state) for the same order'
        : 'sent a forged callback (wrong amount) for the same order',
    );
  }
  return order;
}

/** Every callback is settled (or, unregistered and not --wait, has had an attempt). */
function deliveryDone(run: TriggerRun, v: OrderView): boolean {
  return v.deliveries.every(
    (d) =>
      ['delivered', 'gave-up', 'cancelled'].includes(d.status) ||
      (!run.values.wait && !run.api && d.attempts.length > 0),
  );
}

/** Poll the sandbox (and our console) until the story has ended or the deadline passes. */
async function follow(run: TriggerRun, order: SandboxOrderView) {
  const { api, values, step } = run;
  let view: OrderView = await call<OrderView>('GET', `/control/orders/${encodeURIComponent(order.orderNo)}`);
  let delivered = false;
  let status = 'pending';
  let orderBody: Record<string, unknown> = {};
  while (Date.now() < run.deadline) {
    view = await call<OrderView>('GET', `/control/orders/${encodeURIComponent(order.orderNo)}`);
    const reply = view.deliveries.flatMap((d) => d.attempts).find((a) => a.outcome === 'success');
    if (!delivered && reply) {
      delivered = true;
      step(`callback delivered: ${reply.status} ${JSON.stringify(reply.bodySnippet)}`);
    }
    if (!api) {
      if (deliveryDone(run, view)) break;
    } else {
      const path = `/api/orders/${encodeURIComponent(run.merchantOrderNo)}${merchantParam(run, '?')}`;
      const res = await api.call<Record<string, unknown>>('GET', path);
      if (res.status === 200) {
        orderBody = res.body;
        status = String(res.body.status);
        // With --forge, also until the forged copy has been answered, so its fate is part of the story.
        if (status !== 'pending' && (!values.forge || deliveryDone(run, view))) break;
      }
      if (view.deliveries.some((d) => d.status === 'gave-up')) break;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  return { view, status, orderBody };
}

/** Unregistered: print the deliveries; exit 1 if they have not ended (or, with --wait, if one was given up). */
function reportDelivery(run: TriggerRun, view: OrderView, order: SandboxOrderView): number {
  const { values } = run;
  if (values.json) console.log(JSON.stringify(view, null, 2));
  else print(view);
  if (!deliveryDone(run, view)) {
    console.error(`still waiting after ${values.timeout}; see \`pnpm sandbox order ${order.merchantOrderNo}\``);
    return 1;
  }
  return values.wait && view.deliveries.some((d) => d.status === 'gave-up') ? 1 : 0;
}

/** Registered: tell what our console made of it; exit 0 only if it ended as expected with at most one entry. */
async function reportCredit(
  run: TriggerRun,
  api: ConsoleApi,
  order: SandboxOrderView,
  { view, status, orderBody }: Awaited<ReturnType<typeof follow>>,
): Promise<number> {
  const { kind, values, merchantOrderNo, expected, step } = run;
  type Trail = { receipts?: Record<string, unknown>[]; reviews?: Record<string, unknown>[] };
  const trail = await api.call<Trail>(
    'GET',
    `/api/callbacks?merchantOrderNo=${encodeURIComponent(merchantOrderNo)}${merchantParam(run, '&')}`,
  );
  if (values.forge) {
    for (const d of view.deliveries.filter((f) => f.event !== 'genuine')) {
      const first = d.attempts[0] ? ` (${d.attempts[0].status} ${JSON.stringify(d.attempts[0].bodySnippet)})` : '';
      step(`forged callback ${d.id} [${d.event}]: ${d.status}${first}`);
    }
  }
  const receipt = trail.body.receipts?.find((r) => r.orderNo === order.orderNo);
  if (receipt) {
    step(
      `job ${String(receipt.jobId ?? '(sweep)')} received at ${String(receipt.receivedAt)}; ` +
        `Get order confirmed ${String(receipt.confirmedAmount)}`,
    );
  }
  for (const r of trail.body.reviews ?? [])
    step(`review ${String(r.reasonCode)} (${String(r.status)}): ${String(r.reason)}`);
  if (values.json) console.log(JSON.stringify({ sandbox: view, order: orderBody, callbacks: trail.body }, null, 2));
  const ledger = (orderBody.ledger as { entryType: string; amount: string; currency: string }[] | undefined) ?? [];
  if (ledger.length > 1) {
    console.error(`${kind} ${merchantOrderNo}: ${ledger.length} ledger entries for one order (expected at most one)`);
    return 1;
  }
  if (status === expected) {
    const entries = ledger.map((l) => `${l.entryType} ${l.amount} ${l.currency}`).join(', ');
    step(`${status}${ledger.length ? ` (ledger: ${entries})` : ''}`);
    return 0;
  }
  const why = status === 'pending' ? `still pending after ${values.timeout}` : `ended ${status}, expected ${expected}`;
  console.error(
    `${kind} ${merchantOrderNo}: ${why}; see \`pnpm sandbox order ${order.orderNo}\` ` +
      `and GET /api/callbacks?merchantOrderNo=${merchantOrderNo}`,
  );
  return 1;
}

/** `?merchant=REF` (or `&merchant=REF`) when --merchant was given: our console's reads are per merchant. */
function merchantParam(run: TriggerRun, sep: '?' | '&'): string {
  return run.values.merchant === undefined ? '' : `${sep}merchant=${encodeURIComponent(run.values.merchant)}`;
}

/** Our console, from CONSOLE_TOKEN / CONSOLE_HOST / CONSOLE_PORT (the .env `pnpm dev` writes has them). */
function merchantConsole() {
  if (!config.CONSOLE_TOKEN) {
    throw new Error(
      'CONSOLE_TOKEN is unset: start the stack with `pnpm dev` (it writes .env), export it, or pass --unregistered',
    );
  }
  const host = config.CONSOLE_HOST === '0.0.0.0' ? '127.0.0.1' : config.CONSOLE_HOST;
  return consoleApi(`http://${host}:${config.CONSOLE_PORT}`, config.CONSOLE_TOKEN);
}

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  // `pnpm sandbox trigger --help` asks for help, not for a trigger of kind "--help".
  if (rest.includes('--help') || rest.includes('-h')) {
    console.log(USAGE);
    return 0;
  }
  switch (command) {
    case 'trigger':
      return trigger(rest[0], rest.slice(1));
    case 'order': {
      const { values, positionals } = parseArgs({
        args: rest,
        allowPositionals: true,
        options: { json: { type: 'boolean', default: false }, merchant: { type: 'string' } },
      });
      if (!positionals[0]) {
        console.error(USAGE);
        return 2;
      }
      const of = values.merchant === undefined ? '' : `?merchant=${encodeURIComponent(values.merchant)}`;
      const view = await call<OrderView>('GET', `/control/orders/${encodeURIComponent(positionals[0])}${of}`);
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
