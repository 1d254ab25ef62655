/**
 * A platform double (`@mcb/testkit`'s) in a process of its own, as a merchant's platform is a server of its own: its
 * replies are not held up by another merchant's platform answering a thousand Get orders a second, nor by the
 * bench's feeds, in one event loop. The cores stay shared (its CPU counts as the bench's). The bench drives it over
 * IPC: orders, delays, an outage, and the arrival times of its Get orders.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { platformOrder, startFakePlatform, type FakePlatform } from '@mcb/testkit';

/** What the bench asks of a platform process. */
export type PlatformCommand =
  | {
      op: 'orders';
      /** Orders `${prefix}${1..count}`, platform numbers `P${prefix}${i}`, of merchant `merchantNo`. */
      prefix: string;
      count: number;
      merchantNo: string;
      amount: string;
    }
  | { op: 'delay'; ms: number; /** Only orders starting with this. */ prefix?: string }
  | { op: 'outage'; status?: number }
  | { op: 'arrivals' }
  | { op: 'clear-arrivals' };

export interface PlatformProcess {
  url: string;
  pid: number;
  setOrders(prefix: string, count: number, merchantNo: string, amount: string): Promise<void>;
  setDelay(ms: number, prefix?: string): Promise<void>;
  setOutage(status: number | undefined): Promise<void>;
  /** When each Get order arrived (ms since the epoch), in arrival order. */
  arrivals(): Promise<number[]>;
  clearArrivals(): Promise<void>;
  close(): Promise<void>;
}

type Reply = { id: number; ok: true; value?: unknown } | { id: number; ok: false; error: string };

/** Start a platform double for `merchantNo` in a child process. */
export async function startPlatformProcess(merchantNo: string): Promise<PlatformProcess> {
  const child: ChildProcess = fork(fileURLToPath(import.meta.url), [merchantNo], {
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  const waiting = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  let nextId = 0;
  let exited = false;
  const url = new Promise<string>((resolve, reject) => {
    child.once('message', (m) => resolve((m as { url: string }).url));
    child.once('exit', (code) => reject(new Error(`platform process exited (${code}) before it listened`)));
  });
  child.on('message', (m) => {
    const reply = m as Reply;
    const w = waiting.get(reply.id);
    if (!w) return;
    waiting.delete(reply.id);
    if (reply.ok) w.resolve(reply.value);
    else w.reject(new Error(reply.error));
  });
  child.once('exit', (code) => {
    exited = true;
    for (const w of waiting.values()) w.reject(new Error(`platform process exited (${code})`));
    waiting.clear();
  });
  const ask = <T>(command: PlatformCommand): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      if (exited) return reject(new Error('platform process is gone'));
      const id = nextId++;
      waiting.set(id, { resolve: resolve as (v: unknown) => void, reject });
      child.send({ id, command });
    });
  return {
    url: await url,
    pid: child.pid ?? -1,
    setOrders: (prefix, count, orderMerchantNo, amount) =>
      ask({ op: 'orders', prefix, count, merchantNo: orderMerchantNo, amount }),
    setDelay: (ms, prefix) => ask({ op: 'delay', ms, prefix }),
    setOutage: (status) => ask({ op: 'outage', status }),
    arrivals: () => ask<number[]>({ op: 'arrivals' }),
    clearArrivals: () => ask({ op: 'clear-arrivals' }),
    async close() {
      if (exited) return;
      const gone = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await gone;
    },
  };
}

/** The child: one double, commands in, replies out. */
async function serve(merchantNo: string): Promise<void> {
  const platform: FakePlatform = await startFakePlatform({ merchantNo });
  const run = (c: PlatformCommand): unknown => {
    switch (c.op) {
      case 'orders':
        for (let i = 1; i <= c.count; i++) {
          const no = `${c.prefix}${i}`;
          platform.setOrder(
            platformOrder({
              orderNo: `P${no}`,
              merchantNo: c.merchantNo,
              merchantOrderNo: no,
              type: 'payin',
              state: 6,
              amountJson: c.amount,
              currency: 'INR',
            }),
          );
        }
        return undefined;
      case 'delay':
        platform.setDelay(c.ms, c.prefix === undefined ? undefined : (no) => no.startsWith(c.prefix!));
        return undefined;
      case 'outage':
        platform.setOutage(c.status);
        return undefined;
      case 'arrivals':
        return platform.arrivals;
      case 'clear-arrivals':
        platform.arrivals.length = 0;
        return undefined;
    }
  };
  process.on('message', (m) => {
    const { id, command } = m as { id: number; command: PlatformCommand };
    try {
      process.send!({ id, ok: true, value: run(command) } satisfies Reply);
    } catch (e) {
      process.send!({ id, ok: false, error: e instanceof Error ? e.message : String(e) } satisfies Reply);
    }
  });
  process.once('SIGTERM', () => void platform.close().finally(() => process.exit(0)));
  process.once('disconnect', () => void platform.close().finally(() => process.exit(0)));
  process.send!({ url: platform.url });
}

if (process.argv[1] === fileURLToPath(import.meta.url) && process.send) await serve(process.argv[2]!);
