import type { Logger } from '@mcb/core/logger';

/** Most distinct addresses counted per interval: an attack from many addresses must not grow this without bound. */
const MAX_ADDRESSES = 1000;
const TOP = 5;

/** Refused or cut connections, summed and logged at most once per interval. */
export interface RefusalLog {
  /** Count one refusal; `address` is the source it came from. */
  note(reason: string, address: string | undefined): void;
  /** Log what is still counted and stop. */
  close(): void;
}

/**
 * Under attack a listener refuses thousands of connections a second: one line each would flood the log and cost
 * more than the refusal. The first refusal after a quiet interval is logged at once (the on-call engineer sees it
 * start); the following ones are summed by reason and by source address and logged once per interval while they last.
 */
export function createRefusalLog(logger: Logger, intervalMs = 10_000): RefusalLog {
  let byReason = new Map<string, number>();
  let byAddress = new Map<string, number>();
  let timer: NodeJS.Timeout | undefined;

  const flush = (): boolean => {
    if (byReason.size === 0) return false;
    const total = [...byReason.values()].reduce((a, b) => a + b, 0);
    const top = [...byAddress]
      .sort((a, b) => b[1] - a[1])
      .slice(0, TOP)
      .map(([address, count]) => ({ address, count }));
    logger.warn(
      { refused: total, byReason: Object.fromEntries(byReason), topAddresses: top, intervalSeconds: intervalMs / 1000 },
      'connections refused or cut by the listener bounds (ingest_connections_cut_total)',
    );
    byReason = new Map();
    byAddress = new Map();
    return true;
  };
  const tick = () => {
    // Nothing counted during the last interval: go quiet, so the next refusal is logged at once again.
    timer = flush() ? setTimeout(tick, intervalMs).unref() : undefined;
  };

  return {
    note(reason, address) {
      byReason.set(reason, (byReason.get(reason) ?? 0) + 1);
      if (address !== undefined && (byAddress.has(address) || byAddress.size < MAX_ADDRESSES))
        byAddress.set(address, (byAddress.get(address) ?? 0) + 1);
      if (timer === undefined) {
        flush();
        timer = setTimeout(tick, intervalMs).unref();
      }
    },
    close() {
      clearTimeout(timer);
      timer = undefined;
      flush();
    },
  };
}
