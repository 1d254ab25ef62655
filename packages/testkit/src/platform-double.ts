import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { GET_ORDER_PATH, GET_PAYMENT_METHODS_PATH } from '@mcb/core/platform';

/** What the fake Get order answers for one merchant order number. */
export interface FakeOrder {
  orderNo: string;
  merchantNo: string;
  merchantOrderNo: string;
  type: 'payin' | 'payout';
  state: number;
  /** The raw JSON literal of the amount, e.g. `100.50` (a number) or `"100.50"` (a string). */
  amountJson: string;
  currency: string;
}

/** How getPaymentMethods answers: the catalog, a platform error code, or an HTTP status. */
export type CatalogMode =
  { kind: 'ok' } | { kind: 'code'; code: number; message: string } | { kind: 'http'; status: number };

/**
 * The one platform double of the tests: Get order with scripted answers and failures, and getPaymentMethods
 * serving a given catalog (filtered by `currencyType`) or a scripted failure. Apps' own end-to-end tests use the
 * sandbox, which simulates the whole platform.
 */
export interface FakePlatform {
  url: string;
  /** getPaymentMethods: how it answers now, and every request body it received. */
  catalog: { mode: CatalogMode; requests: Record<string, string>[] };
  /** Requests received per merchant order number. */
  hits: Map<string, number>;
  setOrder(order: FakeOrder): void;
  /** The next `count` requests for this order get HTTP `status` (e.g. 500). */
  failNext(merchantOrderNo: string, count: number, status: number): void;
  /** The next `count` requests for this order get HTTP 200 with an HTML maintenance page (a proxy during a deploy). */
  maintenancePageNext(merchantOrderNo: string, count: number): void;
  /** Requests for this order get the envelope `{code, message}` with no data. */
  refuse(merchantOrderNo: string, code: number, message: string): void;
  /**
   * Get order answers after `ms` from now on (0: at once), as a slow platform does; with `only`, for the orders it
   * accepts (the latest such call first), the others keep their delay.
   */
  setDelay(ms: number, only?: (merchantOrderNo: string) => boolean): void;
  /** Every Get order answers HTTP `status` from now on (an outage); `undefined` ends it. */
  setOutage(status: number | undefined): void;
  /** The next `count` Get orders are answered together, once all `count` have arrived (a barrier: batching tests). */
  holdReplies(count: number): void;
  /** Every Get order's arrival time (performance.now(), ms), for rate checks. */
  arrivals: number[];
  /**
   * Get order answers nothing (for the orders `only` accepts, all by default) until the returned release is called:
   * a slow platform, jobs stay in flight. Held requests are counted in `hits` and `held()`.
   */
  hold(only?: (merchantOrderNo: string) => boolean): () => void;
  /** Get order requests waiting on {@link hold} now. */
  held(): number;
  close(): Promise<void>;
}

/** Options of {@link startFakePlatform}. */
export interface FakePlatformOptions {
  /** Path of Get order. @defaultValue GET_ORDER_PATH (`/api/open/order/getOrder`) */
  getOrderPath?: string;
  /** What getPaymentMethods serves (its `data.currencies`). @defaultValue none: the route answers 404 */
  currencies?: readonly { currency: string }[];
  /**
   * The one merchant number this platform knows: a Get order asked with another is refused (code 40010, merchant
   * not found), as a platform refuses a number that is not its account's. @defaultValue any number is answered
   */
  merchantNo?: string;
}

type Send = (status: number, text: string, type?: string) => void;

/** What the double holds: the scripted answers and failures, and what it has received. */
interface DoubleState {
  path: string;
  merchantNo: string | undefined;
  currencies: readonly { currency: string }[] | undefined;
  catalog: FakePlatform['catalog'];
  orders: Map<string, FakeOrder>;
  failures: Map<string, { count: number; status: number }>;
  refusals: Map<string, { code: number; message: string }>;
  hits: Map<string, number>;
  arrivals: number[];
  delayMs: number;
  delays: { accepts: (merchantOrderNo: string) => boolean; ms: number }[];
  outage: number | undefined;
  pages: Map<string, number>;
  held: { count: number; release: Array<() => void> } | undefined;
  holds: { accepts: (merchantOrderNo: string) => boolean; waiting: (() => void)[] }[];
}

export async function startFakePlatform(options: FakePlatformOptions | string = {}): Promise<FakePlatform> {
  const {
    getOrderPath: path = GET_ORDER_PATH,
    currencies,
    merchantNo,
  } = typeof options === 'string' ? { getOrderPath: options } : options;
  const st: DoubleState = {
    path,
    merchantNo,
    currencies,
    catalog: { mode: { kind: 'ok' }, requests: [] },
    orders: new Map(),
    failures: new Map(),
    refusals: new Map(),
    hits: new Map(),
    arrivals: [],
    delayMs: 0,
    delays: [],
    outage: undefined,
    pages: new Map(),
    held: undefined,
    holds: [],
  };
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
    req.on('end', () => handle(st, req, res, body));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    catalog: st.catalog,
    hits: st.hits,
    setOrder: (o) => st.orders.set(o.merchantOrderNo, o),
    failNext: (no, count, status) => st.failures.set(no, { count, status }),
    maintenancePageNext: (no, count) => st.pages.set(no, count),
    refuse: (no, code, message) => st.refusals.set(no, { code, message }),
    setDelay: (ms, only) => void (only ? st.delays.unshift({ accepts: only, ms }) : (st.delayMs = ms)),
    setOutage: (status) => void (st.outage = status),
    holdReplies: (count) => void (st.held = { count, release: [] }),
    arrivals: st.arrivals,
    hold(only = () => true) {
      const hold = { accepts: only, waiting: [] as (() => void)[] };
      st.holds.push(hold);
      return () => {
        st.holds.splice(st.holds.indexOf(hold), 1);
        for (const go of hold.waiting.splice(0)) go();
      };
    },
    held: () => st.holds.reduce((n, h) => n + h.waiting.length, 0),
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** Answer one request, its body read. */
function handle(st: DoubleState, req: IncomingMessage, res: ServerResponse, body: string): void {
  const send: Send = (status, text, type = 'application/json') => {
    res.writeHead(status, { 'content-type': type });
    res.end(text);
  };
  if (st.currencies && req.method === 'POST' && req.url === GET_PAYMENT_METHODS_PATH) {
    return answerCatalog(st, st.currencies, res, body, send);
  }
  if (req.method !== 'POST' || req.url !== st.path) return send(404, '{"code":404,"message":"no such route"}');
  answerGetOrder(st, body, send);
}

/** getPaymentMethods: the catalog (filtered by `currencyType`) or the scripted failure. */
function answerCatalog(
  st: DoubleState,
  currencies: readonly { currency: string }[],
  res: ServerResponse,
  body: string,
  send: Send,
): void {
  let asked: Record<string, string> = {};
  try {
    asked = (body ? JSON.parse(body) : {}) as Record<string, string>;
  } catch {
    return send(400, '{"code":400,"message":"bad json"}');
  }
  st.catalog.requests.push(asked);
  const mode = st.catalog.mode;
  if (mode.kind === 'http') return void res.writeHead(mode.status).end('unavailable');
  if (mode.kind === 'code') return send(200, JSON.stringify({ code: mode.code, message: mode.message, data: null }));
  const listed = currencies.filter((c) => !asked.currencyType || c.currency === asked.currencyType);
  return send(200, JSON.stringify({ code: 0, message: 'success', data: { currencies: listed } }));
}

/** Get order: counted, then delayed, held at the barrier, failed by an outage or held, as scripted. */
function answerGetOrder(st: DoubleState, body: string, send: Send): void {
  let merchantOrderNo = '';
  let askedAs = '';
  try {
    const asked = JSON.parse(body) as { merchantOrderNo?: unknown; merchantNo?: unknown };
    merchantOrderNo = String(asked.merchantOrderNo ?? '');
    askedAs = String(asked.merchantNo ?? '');
  } catch {
    return send(400, '{"code":400,"message":"bad json"}');
  }
  if (st.merchantNo !== undefined && askedAs !== st.merchantNo) {
    return send(200, '{"code":40010,"message":"merchant not found","data":null}');
  }
  st.hits.set(merchantOrderNo, (st.hits.get(merchantOrderNo) ?? 0) + 1);
  st.arrivals.push(performance.now());
  const wait = st.delays.find((d) => d.accepts(merchantOrderNo))?.ms ?? st.delayMs;
  if (wait > 0) {
    const later = send;
    send = (status, text, type) => void setTimeout(() => later(status, text, type), wait);
  }
  if (st.held) {
    const barrier = st.held;
    const answer = send;
    send = (status, text, type) => void barrier.release.push(() => answer(status, text, type));
    if (barrier.release.length + 1 >= barrier.count) {
      st.held = undefined;
      setImmediate(() => barrier.release.splice(0).forEach((go) => go()));
    }
  }
  if (st.outage !== undefined) return send(st.outage, '{"code":503,"message":"platform outage"}');
  const hold = st.holds.find((h) => h.accepts(merchantOrderNo));
  if (hold) return void hold.waiting.push(() => answer(st, merchantOrderNo, send));
  answer(st, merchantOrderNo, send);
}

/** Get order's answer for one order: a maintenance page, a failure, a refusal, the order, or "not found". */
function answer(st: DoubleState, merchantOrderNo: string, send: Send): void {
  const page = st.pages.get(merchantOrderNo) ?? 0;
  if (page > 0) {
    st.pages.set(merchantOrderNo, page - 1);
    return send(
      200,
      '<!doctype html><html><body><h1>Down for maintenance</h1></body></html>',
      'text/html; charset=utf-8',
    );
  }
  const failure = st.failures.get(merchantOrderNo);
  if (failure && failure.count > 0) {
    failure.count -= 1;
    return send(failure.status, '{"code":500,"message":"scripted failure"}');
  }
  const refusal = st.refusals.get(merchantOrderNo);
  if (refusal) return send(200, JSON.stringify({ code: refusal.code, message: refusal.message, data: null }));
  const o = st.orders.get(merchantOrderNo);
  if (!o) return send(200, '{"code":40404,"message":"order not found","data":null}');
  const { amountJson, ...rest } = o;
  const data = JSON.stringify(rest).slice(0, -1) + `,"amount":${amountJson}}`;
  send(200, `{"code":0,"message":"success","data":${data}}`);
}
