/**
 * What `pnpm demo` does to a running stack: registers orders in the console (as the merchant's shop would), moves
 * them to final states in the sandbox (as customers and the platform would), with duplicate sends, multi-block
 * records, refused payouts and two forged callbacks, and waits until the pipeline has dealt with all of it.
 */
import { PayinState, PayoutState } from '@mcb/core/spec';
import { randomBytes } from 'node:crypto';
import type { Delivery, SandboxOrder } from '@mcb/sandbox';
import { forEachLimited, requestJson } from './http.ts';

/** One order of the plan and what should become of it. */
export interface PlannedOrder {
  merchantOrderNo: string;
  kind: 'payin' | 'payout';
  amount: string;
  /** The platform state it is moved to: pay-in 6 (callback) or 3 (no callback; the forgery target), payout 4 or 5. */
  finalState: number;
  /** Sandbox fault switches of this order. */
  faults: { duplicate?: number; minBlocks?: number };
}

/** The run's orders. */
export interface DemoPlan {
  /** Prefix of every merchant order number of this run (the database may hold earlier runs). */
  runId: string;
  orders: PlannedOrder[];
}

/** A forged callback sent by the run. */
export interface Forgery {
  merchantOrderNo: string;
  /** The platform order number and the state the forged record claims. */
  orderNo: string;
  state: number;
  what: 'amount' | 'state';
  /** The review code the worker must give it. */
  expectedCode: 'VERIFY_AMOUNT_MISMATCH' | 'VERIFY_STATE_MISMATCH';
}

/** What the run did, for the report. */
export interface DemoRun {
  plan: DemoPlan;
  /** Sandbox orders of this run, by merchant order number. */
  platformOrders: Map<string, SandboxOrder>;
  forgeries: Forgery[];
  /** Every delivery of this run as the sandbox recorded it (records are never printed). */
  deliveries: Delivery[];
  startedAt: number;
  finishedAt: number;
}

/** Where the driver talks to. */
export interface DriverTargets {
  /** The merchant (its ref) whose orders these are, with several; undefined: the one merchant, named nowhere. */
  merchant?: string;
  consoleUrl: string;
  consoleToken: string;
  sandboxUrl: string;
  /** Counts of what the pipeline has applied so far for this run (from the database). */
  progress: () => Promise<{ applied: number; reviews: number }>;
  /** Progress line, rewritten in place on a terminal. */
  status: (line: string) => void;
}

const PAYOUT_PARAMS = { accountName: 'Asha Rao', upiId: 'asha.rao@okaxis' };

/** A fresh run id: the prefix of every merchant order number of a run. */
export function newRunId(): string {
  return `DEMO${randomBytes(3).toString('hex').toUpperCase()}`;
}

/**
 * A plan of `count` orders: about a quarter payouts (every fourth refused), the rest pay-ins, one forgery target.
 * `runId` prefixes every merchant order number. @defaultValue runId a fresh one
 */
export function planOrders(count: number, runId: string = newRunId()): DemoPlan {
  const payouts = Math.max(2, Math.round(count * 0.25));
  const payins = Math.max(1, count - payouts - 1);
  const orders: PlannedOrder[] = [];
  const faultsFor = (i: number) => ({
    ...(i % 5 === 0 ? { duplicate: 3 } : {}),
    ...(i % 7 === 3 ? { minBlocks: 3 } : {}),
  });
  const amount = (i: number) => `${100 + (i % 900)}.${String((i * 37) % 100).padStart(2, '0')}`;
  for (let i = 0; i < payins; i++) {
    orders.push({
      merchantOrderNo: `${runId}-I${String(i + 1).padStart(5, '0')}`,
      kind: 'payin',
      amount: amount(i),
      finalState: PayinState.Released,
      faults: faultsFor(i),
    });
  }
  for (let i = 0; i < payouts; i++) {
    orders.push({
      merchantOrderNo: `${runId}-O${String(i + 1).padStart(5, '0')}`,
      kind: 'payout',
      amount: amount(i + 7),
      finalState: i % 4 === 1 ? PayoutState.Refused : PayoutState.Succeeded,
      faults: faultsFor(i + 1),
    });
  }
  // Paid (state 3: no callback), then a forged "released" callback for ten times the amount arrives.
  orders.push({
    merchantOrderNo: `${runId}-F00001`,
    kind: 'payin',
    amount: '250.00',
    finalState: PayinState.Success,
    faults: {},
  });
  return { runId, orders };
}

async function registerInConsole(t: DriverTargets, o: PlannedOrder): Promise<void> {
  const merchant = t.merchant === undefined ? {} : { merchant: t.merchant };
  const order =
    o.kind === 'payin'
      ? {
          merchantOrderNo: o.merchantOrderNo,
          currency: 'INR',
          amount: o.amount,
          reason: 'demo: the merchant registers its order',
        }
      : {
          merchantOrderNo: o.merchantOrderNo,
          currency: 'INR',
          amount: o.amount,
          paymentMethod: 102,
          params: PAYOUT_PARAMS,
          reason: 'demo: the merchant registers its order',
        };
  await requestJson(`${t.consoleUrl}/api/${o.kind}s`, { body: { ...order, ...merchant }, token: t.consoleToken });
}

async function createAndFinalize(t: DriverTargets, o: PlannedOrder): Promise<SandboxOrder> {
  const faults = Object.keys(o.faults).length > 0 ? o.faults : undefined;
  const merchant = t.merchant === undefined ? {} : { merchant: t.merchant };
  await requestJson(`${t.sandboxUrl}/control/${o.kind}s`, {
    body: {
      merchantOrderNo: o.merchantOrderNo,
      currency: 'INR',
      amount: o.amount,
      ...(faults ? { faults } : {}),
      ...merchant,
    },
  });
  const query = t.merchant === undefined ? '' : `?merchant=${encodeURIComponent(t.merchant)}`;
  const done = await requestJson<{ order: SandboxOrder }>(
    `${t.sandboxUrl}/control/orders/${encodeURIComponent(o.merchantOrderNo)}/finalize${query}`,
    {
      body: { state: o.finalState },
    },
  );
  return done.order;
}

async function deliveriesOfRun(t: DriverTargets, runId: string): Promise<Delivery[]> {
  const { deliveries } = await requestJson<{ deliveries: Delivery[] }>(`${t.sandboxUrl}/control/deliveries`);
  return deliveries.filter((d) => d.merchantOrderNo.startsWith(`${runId}-`));
}

const SETTLED = new Set<Delivery['status']>(['delivered', 'gave-up', 'cancelled']);

/** Poll until `done` says so, printing progress; throws at the deadline with what was still missing. */
async function waitUntil(
  t: DriverTargets,
  runId: string,
  deadline: number,
  expect: { deliveries: number; applied: number; reviews: number },
  registered: string,
): Promise<Delivery[]> {
  for (;;) {
    const [deliveries, progress] = await Promise.all([deliveriesOfRun(t, runId), t.progress()]);
    const settled = deliveries.filter((d) => SETTLED.has(d.status)).length;
    t.status(
      `${registered} · callbacks settled ${settled}/${expect.deliveries} · applied ${progress.applied}/${expect.applied} · reviews ${progress.reviews}/${expect.reviews}`,
    );
    if (settled >= expect.deliveries && progress.applied >= expect.applied && progress.reviews >= expect.reviews)
      return deliveries;
    if (Date.now() > deadline) {
      throw new Error(
        `timed out: ${settled}/${expect.deliveries} callbacks settled, ${progress.applied}/${expect.applied} events applied, ` +
          `${progress.reviews}/${expect.reviews} reviews (see the app logs)`,
      );
    }
    await new Promise((r) => setTimeout(r, 200));
  }
}

/**
 * Run the plan: register every order, finalise it in the sandbox, wait for the pipeline, then send the two forged
 * callbacks and wait for their reviews. Throws on a refused request or when `timeoutMs` passes.
 */
export async function driveDemo(t: DriverTargets, plan: DemoPlan, timeoutMs: number): Promise<DemoRun> {
  const startedAt = Date.now();
  const deadline = startedAt + timeoutMs;
  const total = plan.orders.length;
  let registered = 0;
  let finalized = 0;
  const platformOrders = new Map<string, SandboxOrder>();

  // 1. The shop registers its orders, then customers pay and payouts finish: in parallel lanes, as traffic would.
  await forEachLimited(plan.orders, 16, async (o) => {
    await registerInConsole(t, o);
    registered++;
    platformOrders.set(o.merchantOrderNo, await createAndFinalize(t, o));
    finalized++;
    if (finalized % 20 === 0 || finalized === total)
      t.status(`orders registered ${registered}/${total} · finalised ${finalized}/${total}`);
  });
  const withCallback = plan.orders.filter((o) => o.finalState !== PayinState.Success);
  const done = `orders ${total}/${total}`;
  await waitUntil(
    t,
    plan.runId,
    deadline,
    { deliveries: withCallback.length, applied: withCallback.length, reviews: 0 },
    done,
  );

  // 2. Forgeries: a "released" pay-in for ten times what the customer paid, and a "refused" payout (a refund claim)
  //    for a payout that succeeded. Get order contradicts both.
  const forgeries: Forgery[] = [];
  const target = plan.orders.find((o) => o.finalState === PayinState.Success);
  const succeeded = plan.orders.find((o) => o.kind === 'payout' && o.finalState === PayoutState.Succeeded);
  for (const [o, what, code] of [
    [target, 'amount', 'VERIFY_AMOUNT_MISMATCH'],
    [succeeded, 'state', 'VERIFY_STATE_MISMATCH'],
  ] as const) {
    if (!o) continue;
    const { delivery } = await requestJson<{ delivery: Delivery }>(`${t.sandboxUrl}/control/forge`, {
      body: { what, ref: o.merchantOrderNo, ...(t.merchant === undefined ? {} : { merchant: t.merchant }) },
    });
    forgeries.push({
      merchantOrderNo: o.merchantOrderNo,
      orderNo: delivery.orderNo,
      state: delivery.state,
      what,
      expectedCode: code,
    });
  }
  const deliveries = await waitUntil(
    t,
    plan.runId,
    deadline,
    { deliveries: withCallback.length + forgeries.length, applied: withCallback.length, reviews: forgeries.length },
    done,
  );
  return { plan, platformOrders, forgeries, deliveries, startedAt, finishedAt: Date.now() };
}
