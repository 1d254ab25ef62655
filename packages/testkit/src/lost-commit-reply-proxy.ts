import { startTcpProxy, type TcpProxy } from './tcp-proxy.ts';

/** A TCP proxy to Postgres that can lose the reply to one COMMIT: the server commits, the client never hears it. */
export interface LostCommitReplyProxy {
  port: number;
  /**
   * Lose the reply of the next COMMIT that passes through. With `thenRefuse`, stop accepting connections right
   * after, until {@link restore}: Postgres cannot be asked whether it committed (as during its restart).
   * With `commitNeverArrives`, the COMMIT itself is swallowed and the connection cut instead: Postgres rolls the
   * transaction back, and the client sees the same failed COMMIT. Resolves once that reply (or that COMMIT) was
   * swallowed (and its connection cut).
   */
  armOnce(options?: { thenRefuse?: boolean; commitNeverArrives?: boolean }): Promise<void>;
  /** Accept connections again (after `thenRefuse`). */
  restore(): Promise<void>;
  close(): Promise<void>;
}

// Postgres wire protocol: the simple query "COMMIT" ('Q', length 11, "COMMIT\0") and its CommandComplete
// ('C', length 11, "COMMIT\0"). node-postgres sends a transaction's COMMIT as a simple query.
const COMMIT_QUERY = Buffer.from([0x51, 0, 0, 0, 11, ...Buffer.from('COMMIT\0')]);
const COMMIT_DONE = Buffer.from([0x43, 0, 0, 0, 11, ...Buffer.from('COMMIT\0')]);

export async function startLostCommitReplyProxy(targetHost: string, targetPort: number): Promise<LostCommitReplyProxy> {
  let armed = false;
  let refuseAfter = false;
  let rollBack = false;
  let markLost: () => void = () => {};
  // The connection whose COMMIT was armed: its CommandComplete is swallowed and the connection cut.
  const doomed = new WeakSet<() => void>();
  const proxy: TcpProxy = await startTcpProxy(targetHost, targetPort, {
    toServer(chunk, drop) {
      if (armed && chunk.includes(COMMIT_QUERY)) {
        armed = false;
        if (rollBack) {
          // The server never sees the COMMIT; the cut connection makes it roll the transaction back.
          drop();
          markLost();
          return false;
        }
        doomed.add(drop);
      }
      return true;
    },
    toClient(chunk, drop) {
      // The server has committed (CommandComplete COMMIT): cut the connection instead of telling the client.
      if (!doomed.has(drop) || !chunk.includes(COMMIT_DONE)) return true;
      drop();
      if (refuseAfter) void proxy.cut();
      markLost();
      return false;
    },
  });
  return {
    get port() {
      return proxy.port;
    },
    armOnce: (options = {}) => {
      armed = true;
      refuseAfter = options.thenRefuse ?? false;
      rollBack = options.commitNeverArrives ?? false;
      return new Promise<void>((resolve) => (markLost = resolve));
    },
    restore: () => proxy.restore(),
    close: () => proxy.close(),
  };
}
