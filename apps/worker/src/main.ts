// First, before anything that loads drizzle-orm is resolved; runWorker's modules come by import() below.
import '@mcb/core/module-hooks';
import { configWarnings, loadConfig } from '@mcb/core/config';
import { coerceError } from '@mcb/core/errors';
import { createReleasers } from '@mcb/core/lifecycle';
import { createLogger, logFormatOf } from '@mcb/core/logger';
import { startTracing } from '@mcb/core/tracing';

// Only the process: the config, the logger, the releasers and the signals; runWorker builds the rest (run-worker.ts)
// and registers each resource's close with the releasers as it makes it. Shutdown runs them in reverse order.
const logger = createLogger({ name: 'worker', format: logFormatOf(process.env) });
const releasers = createReleasers(logger, { stoppingMessage: 'shutting down: finishing jobs in progress' });

try {
  const config = loadConfig(process.env, 'worker');
  // First: queues and workers take BullMQ's telemetry when they are built; released last, after the spans they end.
  const tracing = startTracing('mcb-worker', { ...process.env, ...config });
  if (tracing) releasers.add('tracing', () => tracing.shutdown());
  logger.level = config.LOG_LEVEL;
  releasers.setTimeout(config.WORKER_SHUTDOWN_TIMEOUT);
  for (const warning of configWarnings(config)) logger.warn(warning);
  const { runWorker } = await import('./run-worker.ts');
  await runWorker({ config, logger, releasers });
  releasers.onSignals();
} catch (e) {
  logger.fatal({ err: coerceError(e) }, `worker failed to start: ${coerceError(e).message}`);
  await releasers.shutdown('startup-failure', 1);
}
