import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

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

/** A local stand-in for the platform's Get order, with scripted failures. */
export interface FakePlatform {
  url: string;
  /** Requests received per merchant order number. */
  hits: Map<string, number>;
  setOrder(order: FakeOrder): void;
  /** The next `count` requests for this order get HTTP `status` (e.g. 500). */
  failNext(merchantOrderNo: string, count: number, status: number): void;
  /** Requests for this order get the envelope `{code, message}` with no data. */
  refuse(merchantOrderNo: string, code: number, message: string): void;
  close(): Promise<void>;
}

export async function startFakePlatform(path = '/api/open/order/getOrder'): Promise<FakePlatform> {
  const orders = new Map<string, FakeOrder>();
  const failures = new Map<string, { count: number; status: number }>();
  const refusals = new Map<string, { code: number; message: string }>();
  const hits = new Map<string, number>();
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
    req.on('end', () => {
      const send = (status: number, text: string) => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(text);
      };
      if (req.method !== 'POST' || req.url !== path) return send(404, '{"code":404,"message":"no such route"}');
      let merchantOrderNo = '';
      try {
        merchantOrderNo = String((JSON.parse(body) as { merchantOrderNo?: unknown }).merchantOrderNo ?? '');
      } catch {
        return send(400, '{"code":400,"message":"bad json"}');
      }
      hits.set(merchantOrderNo, (hits.get(merchantOrderNo) ?? 0) + 1);
      const failure = failures.get(merchantOrderNo);
      if (failure && failure.count > 0) {
        failure.count -= 1;
        return send(failure.status, '{"code":500,"message":"scripted failure"}');
      }
      const refusal = refusals.get(merchantOrderNo);
      if (refusal) return send(200, JSON.stringify({ code: refusal.code, message: refusal.message, data: null }));
      const o = orders.get(merchantOrderNo);
      if (!o) return send(200, '{"code":40404,"message":"order not found","data":null}');
      const { amountJson, ...rest } = o;
      const data = JSON.stringify(rest).slice(0, -1) + `,"amount":${amountJson}}`;
      send(200, `{"code":0,"message":"success","data":${data}}`);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    hits,
    setOrder: (o) => orders.set(o.merchantOrderNo, o),
    failNext: (no, count, status) => failures.set(no, { count, status }),
    refuse: (no, code, message) => refusals.set(no, { code, message }),
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
