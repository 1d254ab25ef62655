import { coerceError } from './errors.ts';
import type { Logger } from './logger.ts';

/** What a `main.ts` registers its resources with, so they close in reverse order of creation. */
export interface Releasers {
  /** Register a resource's close, right after creating it. */
  add(name: string, release: () => Promise<unknown>): void;
  /**
   * Close everything once, newest first (a failed close is logged and the rest still close), then exit.
   * Later calls wait on nothing and return.
   */
  shutdown(reason: string, exitCode?: number): Promise<void>;
  /** Shut down on SIGTERM and SIGINT. */
  onSignals(): void;
}

/** Options of {@link createReleasers}. */
export interface ReleasersOptions {
  /** Logged when shutdown starts. @defaultValue 'shutting down' */
  stoppingMessage?: string;
  /** How the process ends; tests pass a stub. @defaultValue process.exit */
  exit?: (code: number) => void;
  /** A shutdown still running after this many ms is cut short: logged, and the process exits 1. @defaultValue none */
  graceMs?: number;
}

/** The wiring habit of every app's `main.ts` (graphile-worker's `withReleasers`), written once. */
export function createReleasers(logger: Logger, options: ReleasersOptions = {}): Releasers {
  const releasers: { name: string; release: () => Promise<unknown> }[] = [];
  let stopping = false;
  const shutdown = async (reason: string, exitCode = 0): Promise<void> => {
    if (stopping) return;
    stopping = true;
    logger.info({ reason }, options.stoppingMessage ?? 'shutting down');
    if (options.graceMs !== undefined) {
      setTimeout(() => {
        logger.fatal({ graceMs: options.graceMs }, 'shutdown took too long; exiting');
        (options.exit ?? process.exit)(1);
      }, options.graceMs).unref();
    }
    for (const { name, release } of releasers.reverse()) {
      try {
        await release();
      } catch (e) {
        logger.error({ err: coerceError(e), resource: name }, 'close failed');
      }
    }
    logger.info('stopped');
    (options.exit ?? process.exit)(exitCode);
  };
  return {
    add: (name, release) => void releasers.push({ name, release }),
    shutdown,
    onSignals() {
      process.once('SIGTERM', () => void shutdown('SIGTERM'));
      process.once('SIGINT', () => void shutdown('SIGINT'));
    },
  };
}
