import { coerceError } from './errors.ts';
import type { Logger } from './logger.ts';

/** The default bound of a shutdown: below the 30 s a Kubernetes pod gets between SIGTERM and SIGKILL. */
export const DEFAULT_SHUTDOWN_TIMEOUT_MS = 25_000;

/** What a `main.ts` registers its resources with, so they close in reverse order of creation. */
export interface Releasers {
  /**
   * Register a resource's close, right after creating it. `force`, if given, is called instead of waiting any longer
   * when the shutdown runs out of time while this resource is still open (a forced BullMQ close, a disconnect).
   */
  add(name: string, release: () => Promise<unknown>, force?: () => unknown): void;
  /**
   * Close everything once, newest first (a failed close is logged and the rest still close), then exit. Bounded by
   * the timeout: what has not closed by then is forced, and the process exits 1. Later calls wait on nothing.
   */
  shutdown(reason: string, exitCode?: number): Promise<void>;
  /** The bound of a shutdown from now on, in ms (from the config, which is read after the releasers exist). */
  setTimeout(timeoutMs: number): void;
  /** Shut down on SIGTERM and SIGINT. The same signal again during a shutdown ends the process at once. */
  onSignals(): void;
}

/** Options of {@link createReleasers}. */
export interface ReleasersOptions {
  /** Logged when shutdown starts. @defaultValue 'shutting down' */
  stoppingMessage?: string;
  /** How the process ends; tests pass a stub. @defaultValue process.exit */
  exit?: (code: number) => void;
  /** The bound of a shutdown, in ms, until {@link Releasers.setTimeout}. @defaultValue 25000 */
  timeoutMs?: number;
}

/**
 * The share of the bound kept for forcing: forced closes start this long before the bound and the process exits at
 * the bound whatever they do (a disconnect can itself hang while Redis is unreachable).
 */
export function forceBudgetMs(timeoutMs: number): number {
  return Math.min(1000, Math.floor(timeoutMs / 4));
}

/**
 * The wiring habit of every app's `main.ts` (graphile-worker's `withReleasers`), written once. A shutdown is bounded:
 * an orchestrator SIGKILLs after its grace period (Compose 10 s, Kubernetes 30 s), so we stop first, in order, and
 * say what was left open.
 */
export function createReleasers(logger: Logger, options: ReleasersOptions = {}): Releasers {
  const releasers: { name: string; release: () => Promise<unknown>; force?: () => unknown; done: boolean }[] = [];
  const exit = options.exit ?? ((code: number) => process.exit(code));
  let timeoutMs = options.timeoutMs ?? DEFAULT_SHUTDOWN_TIMEOUT_MS;
  let stopping = false;

  const closeInOrder = async (): Promise<void> => {
    for (const r of [...releasers].reverse()) {
      try {
        await r.release();
      } catch (e) {
        logger.error({ err: coerceError(e), resource: r.name }, 'close failed');
      }
      r.done = true;
    }
  };

  /** Force what is still open, newest first, all at once; never longer than the force budget. */
  const forceTheRest = async (budgetMs: number): Promise<void> => {
    const open = [...releasers].reverse().filter((r) => !r.done);
    logger.error(
      { timeoutMs, open: open.map((r) => r.name) },
      `shutdown did not finish within ${timeoutMs} ms: forcing ${open.map((r) => r.name).join(', ') || 'nothing'} closed`,
    );
    const forced = Promise.allSettled(
      open.map(async (r) => {
        try {
          await r.force?.();
        } catch (e) {
          logger.warn({ err: coerceError(e), resource: r.name }, 'forced close failed');
        }
      }),
    );
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([forced, new Promise<void>((resolve) => (timer = setTimeout(resolve, budgetMs)))]);
    clearTimeout(timer);
  };

  const shutdown = async (reason: string, exitCode = 0): Promise<void> => {
    if (stopping) return;
    stopping = true;
    logger.info({ reason, timeoutMs }, options.stoppingMessage ?? 'shutting down');
    const budget = forceBudgetMs(timeoutMs);
    let timer: NodeJS.Timeout | undefined;
    const outOfTime = new Promise<'timeout'>(
      (resolve) => (timer = setTimeout(() => resolve('timeout'), timeoutMs - budget)),
    );
    const result = await Promise.race([closeInOrder().then(() => 'closed' as const), outOfTime]);
    clearTimeout(timer);
    if (result === 'timeout') {
      await forceTheRest(budget);
      logger.error({ reason, timeoutMs }, 'stopped (forced): exiting 1');
      exit(1);
      return;
    }
    logger.info('stopped');
    exit(exitCode);
  };
  return {
    add: (name, release, force) => void releasers.push({ name, release, force, done: false }),
    shutdown,
    setTimeout(ms) {
      timeoutMs = ms;
    },
    onSignals() {
      // `once`: the same signal again meets Node's default handler and ends the process at once (an operator's way out);
      // SIGINT then SIGTERM does not (an ingest cluster worker gets both from a terminal's Ctrl-C and from its primary).
      process.once('SIGTERM', () => void shutdown('SIGTERM'));
      process.once('SIGINT', () => void shutdown('SIGINT'));
    },
  };
}
