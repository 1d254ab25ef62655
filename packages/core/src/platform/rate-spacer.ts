import { AppError, ErrorCodes } from '../errors.ts';

/**
 * At most `rps` requests start in any window of 1.1 s, spread evenly: at most `b` starts in any `1.1 s × b / rps`
 * (b, the largest divisor of `rps` up to rps / 50, so about 20 ms' worth: timers cannot space single requests a
 * fraction of a millisecond apart). A sliding log of start times is checked before each start, in arrival order.
 * The extra tenth of a second is room for network jitter, so that the platform, counting arrivals, never sees more
 * than `rps` in a second.
 */
export function createRateSpacer(rps: number, windowMs = 1100): { take(signal?: AbortSignal): Promise<void> } {
  let b = Math.max(1, Math.ceil(rps / 50));
  while (rps % b !== 0) b--;
  const span = (windowMs * b) / rps;
  const starts = new Float64Array(b); // ring of the last `b` start times
  let count = 0;
  let head = 0; // the oldest start, once the ring is full
  const waiters: Array<{ go: () => void; signal?: AbortSignal }> = [];
  let timer: NodeJS.Timeout | undefined;
  const pump = () => {
    timer = undefined;
    while (waiters.length > 0) {
      const w = waiters[0]!;
      if (w.signal?.aborted) {
        waiters.shift();
        continue;
      }
      const now = performance.now();
      if (count === b && now - starts[head]! < span) {
        timer = setTimeout(pump, span - (now - starts[head]!) + 0.5);
        return;
      }
      if (count < b) starts[count++] = now;
      else {
        starts[head] = now;
        head = (head + 1) % b;
      }
      waiters.shift();
      w.go();
    }
  };
  return {
    take(signal) {
      return new Promise<void>((resolve, reject) => {
        signal?.addEventListener(
          'abort',
          () => reject(new AppError(ErrorCodes.PLATFORM_ABORTED, 'aborted while waiting for a request slot')),
          { once: true },
        );
        waiters.push({ go: resolve, signal });
        if (!timer) pump();
      });
    },
  };
}
