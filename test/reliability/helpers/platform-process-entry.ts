/**
 * The process of platform-process.ts: testkit's platform double, answering its parent's calls over IPC (one message
 * each, answered with the same `id`). Arrival times go back in wall-clock ms: each process has its own
 * performance.timeOrigin. It exits with its parent (the IPC channel closes).
 */
import { startFakePlatform, type FakeOrder } from '../../../packages/testkit/src/platform-double.ts';

export type PlatformCall =
  | { id: number; kind: 'setOrders'; orders: FakeOrder[] }
  | { id: number; kind: 'setOutage'; status: number | undefined }
  | { id: number; kind: 'arrivals' }
  | { id: number; kind: 'close' };

export type PlatformReply = { id: number; url?: string; arrivals?: number[] };

const send = (r: PlatformReply) => process.send!(r);
const platform = await startFakePlatform();
process.on('disconnect', () => process.exit(0));
process.on('message', (call: PlatformCall) => {
  const reply = (r: Omit<PlatformReply, 'id'> = {}) => send({ id: call.id, ...r });
  switch (call.kind) {
    case 'setOrders':
      for (const o of call.orders) platform.setOrder(o);
      return reply();
    case 'setOutage':
      platform.setOutage(call.status);
      return reply();
    case 'arrivals':
      return reply({ arrivals: platform.arrivals.map((t) => performance.timeOrigin + t) });
    case 'close':
      return void platform.close().then(() => {
        reply();
        process.disconnect();
      });
  }
});
send({ id: 0, url: platform.url });
