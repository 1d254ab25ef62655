/**
 * testkit's platform double in a process of its own, for tests that count when requests arrive. The double stamps
 * each Get order when its event loop reads the request. In the test's process that loop also runs vitest, the
 * test's polling and its garbage collection, and it shares the test's share of the CPU: under load it stalls for
 * hundreds of ms, and every request that came in meanwhile gets the same time (a steady 40 a second read as 48 in
 * one second, or 57 and then 18). The platform is another machine; the closest here is a process of its own in a
 * session of its own (Linux's autogroup shares the CPU between sessions first, as it does for each worker, which
 * runs detached too): it uses little CPU and reads each request as it arrives.
 */
import { fork } from 'node:child_process';
import type { FakeOrder } from '@mcb/testkit';
import { killQuietly, onProcessExit } from '@mcb/testkit';
import type { PlatformCall, PlatformReply } from './platform-process-entry.ts';

/** A call without its id (added by `call`). */
type Call = PlatformCall extends infer C ? (C extends unknown ? Omit<C, 'id'> : never) : never;

export interface SeparatePlatform {
  url: string;
  /** Get order confirms these orders (by `merchantOrderNo`). */
  setOrders(orders: FakeOrder[]): Promise<void>;
  /** Every Get order answers HTTP `status` from now on (an outage); `undefined` ends it. */
  setOutage(status: number | undefined): Promise<void>;
  /** Every Get order's arrival so far, on the test's performance.now() clock (ms). */
  arrivals(): Promise<number[]>;
  close(): Promise<void>;
}

export async function startPlatformProcess(): Promise<SeparatePlatform> {
  const child = fork(new URL('./platform-process-entry.ts', import.meta.url), {
    execArgv: [],
    detached: true,
    serialization: 'advanced',
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const pid = child.pid!;
  const unregister = onProcessExit(() => killQuietly(pid, true));
  const waiting = new Map<number, { resolve: (r: PlatformReply) => void; reject: (e: Error) => void }>();
  let next = 0;
  let gone: Error | undefined;
  const exited = new Promise<void>((resolve) =>
    child.once('exit', (code, signal) => {
      unregister();
      gone = new Error(`the platform double's process exited (${code ?? signal})`);
      for (const w of waiting.values()) w.reject(gone);
      waiting.clear();
      resolve();
    }),
  );
  child.on('message', (r: PlatformReply) => {
    waiting.get(r.id)?.resolve(r);
    waiting.delete(r.id);
  });
  const call = (c: Call) =>
    new Promise<PlatformReply>((resolve, reject) => {
      if (gone) return reject(gone);
      const id = ++next;
      waiting.set(id, { resolve, reject });
      child.send({ ...c, id });
    });
  const { url } = await new Promise<PlatformReply>((resolve, reject) => waiting.set(0, { resolve, reject }));
  return {
    url: url!,
    setOrders: async (orders) => void (await call({ kind: 'setOrders', orders })),
    setOutage: async (status) => void (await call({ kind: 'setOutage', status })),
    async arrivals() {
      const { arrivals = [] } = await call({ kind: 'arrivals' });
      return arrivals.map((t) => t - performance.timeOrigin);
    },
    async close() {
      if (!gone) await call({ kind: 'close' }).catch(() => undefined);
      await exited;
    },
  };
}
