/**
 * The console rolls each merchant's closed minutes up (minutes.ts) once a minute, so the 24-hour picture is there
 * when someone opens it and survives restarts; a page read rolls up too when the timer is behind. Two consoles may
 * both run it: one does the work (the advisory lock), the other skips.
 */
import type { Database } from '@mcb/core/db';
import { coerceError } from '@mcb/core/errors';
import type { Logger } from '@mcb/core/logger';
import { rollupMinutes } from './minutes.ts';

export interface RollupTimer {
  /** Stop the timer and wait for a run in progress. */
  close(): Promise<void>;
}

export function startMinutesRollup(options: {
  db: Database;
  merchantNos: readonly string[];
  logger: Pick<Logger, 'warn'>;
  /** @defaultValue 60000 */
  everyMs?: number;
}): RollupTimer {
  let running: Promise<unknown> = Promise.resolve();
  const run = () => {
    running = rollupMinutes(options.db, options.merchantNos).catch((e) =>
      options.logger.warn({ err: coerceError(e) }, 'merchant minutes roll-up failed; the next run catches up'),
    );
  };
  const timer = setInterval(run, options.everyMs ?? 60_000);
  timer.unref();
  const first = setTimeout(run, 0);
  first.unref();
  return {
    async close() {
      clearInterval(timer);
      clearTimeout(first);
      await running;
    },
  };
}
