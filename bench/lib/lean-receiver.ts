/**
 * The honest baseline of `pnpm bench --only compare`: the in-request callback receiver a merchant writes first, the
 * spec's handling order and nothing more, with the obvious libraries (node:http, node:crypto, pg, undici) and none of
 * ours (no @mcb/core, no @mcb/settlement). Per pay-in callback, inside the request:
 *
 *   1. decrypt: Base64, then `crypto.privateDecrypt({ key, padding: RSA_PKCS1_PADDING }, block)` per key-size block
 *      (the documented call, as the spec describes it), then JSON;
 *   2. check MerchantNo;
 *   3. look up the order and the pair (OrderNo, OrderState): one SELECT; a pair already applied answers `success`;
 *   4. Get order (undici `request`, keep-alive pool): state 6 or 3, amount = FiatCurrency = our order's amount;
 *   5. ONE transaction: the receipt (unique (order_no, state, merchant_no), `ON CONFLICT DO NOTHING RETURNING`: a duplicate that
 *      raced past step 3 inserts nothing and rolls back), the order's move to credited, the ledger entry;
 *
 * then `success`. Every failure answers 5xx `fail` (the platform retries). Runs on all cores (node:cluster), 16
 * Postgres connections a process. Env: PORT, DATABASE_URL, PLATFORM_BASE_URL, MERCHANT_NO, MERCHANT_PRIVATE_KEY_FILE.
 */
import cluster from 'node:cluster';
import { constants, createPrivateKey, privateDecrypt } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { availableParallelism } from 'node:os';
import pg from 'pg';
import { Pool as HttpPool } from 'undici';

const env = (name: string): string => {
  const v = process.env[name];
  if (!v) throw new Error(`lean receiver: ${name} is required`);
  return v;
};

if (cluster.isPrimary) {
  // Ready (every fork's /readyz answers 200) only once every fork listens: else the first would get every connection.
  const forks = availableParallelism();
  let listening = 0;
  cluster.on('listening', () => {
    if (++listening === forks) for (const w of Object.values(cluster.workers ?? {})) w?.send('ready');
  });
  for (let i = 0; i < forks; i++) cluster.fork();
  process.once('SIGTERM', () => {
    for (const w of Object.values(cluster.workers ?? {})) w?.kill('SIGTERM');
    process.exit(0);
  });
} else {
  const merchantNo = env('MERCHANT_NO');
  const key = createPrivateKey(readFileSync(env('MERCHANT_PRIVATE_KEY_FILE')));
  const blockBytes = (key.asymmetricKeyDetails?.modulusLength ?? 2048) / 8;
  const db = new pg.Pool({ connectionString: env('DATABASE_URL'), max: 16, application_name: 'bench-lean-receiver' });
  const platform = new HttpPool(env('PLATFORM_BASE_URL'), { connections: 64 });

  /** Numbers kept as their JSON text: money is compared exactly, never as a float. */
  const parseExact = (text: string): Record<string, unknown> =>
    JSON.parse(text, (_k, v: unknown, ctx?: { source?: string }) =>
      typeof v === 'number' && ctx?.source ? ctx.source : v,
    ) as Record<string, unknown>;
  /** "1000.10" and "1000.1" are the same amount. */
  const sameAmount = (a: unknown, b: unknown): boolean => {
    const norm = (x: unknown) =>
      String(x)
        .replace(/(\.\d*?)0+$/, '$1')
        .replace(/\.$/, '');
    return a !== undefined && b !== undefined && norm(a) === norm(b);
  };

  function decrypt(encryptedData: string): Record<string, unknown> {
    const bytes = Buffer.from(encryptedData, 'base64');
    if (bytes.length === 0 || bytes.length % blockBytes !== 0) throw new Error('not whole blocks');
    const parts: Buffer[] = [];
    for (let at = 0; at < bytes.length; at += blockBytes) {
      parts.push(privateDecrypt({ key, padding: constants.RSA_PKCS1_PADDING }, bytes.subarray(at, at + blockBytes)));
    }
    // Field names case-insensitively (the spec's naming rule).
    const record = parseExact(Buffer.concat(parts).toString('utf8'));
    return Object.fromEntries(Object.entries(record).map(([k, v]) => [k.toLowerCase(), v]));
  }

  async function handle(body: string): Promise<number> {
    let r: Record<string, unknown>;
    try {
      r = decrypt(String((JSON.parse(body) as { encryptedData?: unknown }).encryptedData ?? ''));
    } catch {
      return 400;
    }
    if (r.merchantno !== merchantNo) return 400;
    const orderNo = String(r.orderno);
    const state = Number(r.orderstate);
    const merchantOrderNo = String(r.merchantorderno);

    const found = await db.query<{ id: string; amount: string; status: string; seen: boolean }>(
      `select o.id, o.amount::text as amount, o.status,
              exists (select 1 from callback_receipts r where r.order_no = $1 and r.state = $2) as seen
         from orders o where o.merchant_order_no = $3 and o.kind = 'payin'`,
      [orderNo, state, merchantOrderNo],
    );
    const order = found.rows[0];
    if (!order) return 503; // not registered (yet): let the platform retry
    if (order.seen) return 200; // this pair was applied already

    const res = await platform.request({
      method: 'POST',
      path: '/api/open/order/getOrder',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ merchantNo, merchantOrderNo }),
    });
    const reply = parseExact(await res.body.text());
    const confirmed = reply.data as Record<string, unknown> | undefined;
    if (res.statusCode !== 200 || String(reply.code) !== '0' || !confirmed) return 503;
    if (confirmed.merchantOrderNo !== merchantOrderNo || (confirmed.state !== '6' && confirmed.state !== '3'))
      return 503;
    if (!sameAmount(confirmed.amount, r.fiatcurrency) || !sameAmount(confirmed.amount, order.amount)) return 503;

    const client = await db.connect();
    try {
      await client.query('begin');
      const receipt = await client.query<{ id: string }>(
        `insert into callback_receipts (order_no, state, kind, merchant_no, merchant_order_no, order_id, pay_time,
           quantity, fiat_amount, confirmed_amount, source, outcome)
         values ($1, $2, 'payin', $3, $4, $5, ($6 || '+08:00')::timestamptz, $7, $8, $9, 'callback', 'credited')
         on conflict (order_no, state, merchant_no) do nothing returning id`,
        [
          orderNo,
          state,
          merchantNo,
          merchantOrderNo,
          order.id,
          String(r.paytime),
          String(r.quantity),
          String(r.fiatcurrency),
          String(confirmed.amount),
        ],
      );
      if (!receipt.rows[0]) {
        await client.query('rollback');
        return 200; // a concurrent duplicate credited it first
      }
      const moved = await client.query(
        `update orders set status = 'credited', platform_order_no = $1, updated_at = now(), finalized_at = now()
          where id = $2 and status = 'pending'`,
        [orderNo, order.id],
      );
      if (moved.rowCount !== 1) {
        await client.query('rollback');
        return 503;
      }
      await client.query(
        `insert into ledger_entries (order_id, entry_type, amount, currency, receipt_id)
         values ($1, 'payin_credit', $2, 'INR', $3)`,
        [order.id, String(confirmed.amount), receipt.rows[0].id],
      );
      await client.query('commit');
      return 200;
    } catch (e) {
      await client.query('rollback').catch(() => {});
      throw e;
    } finally {
      client.release();
    }
  }

  let ready = false;
  process.on('message', (m) => (ready ||= m === 'ready'));
  // With its length: without one, node:http would send the body chunked.
  const reply = (res: ServerResponse, status: number) => {
    const body = status === 200 ? 'success' : 'fail';
    res.writeHead(status, { 'content-type': 'text/plain', 'content-length': body.length }).end(body);
  };
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    if (req.method === 'GET' && req.url === '/readyz') return reply(res, ready ? 200 : 503);
    if (req.method !== 'POST') return reply(res, 405);
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > 4096)
        req.destroy(); // a few kilobytes suffice (the spec)
      else chunks.push(c);
    });
    req.on('end', () => {
      handle(Buffer.concat(chunks).toString('utf8')).then(
        (status) => reply(res, status),
        () => reply(res, 503),
      );
    });
  });
  server.keepAliveTimeout = 60_000;
  server.listen(Number(env('PORT')), '127.0.0.1');
  process.once('SIGTERM', () => {
    server.closeAllConnections();
    server.close(() => void Promise.all([db.end(), platform.close()]).then(() => process.exit(0)));
  });
}
