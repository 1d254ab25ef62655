/**
 * `pnpm demo [--once] [--orders N] [--free-ports] [--timeout 60s] [--summary-file FILE]`: the whole pipeline on
 * this machine against the sandbox, a few hundred orders through it, a summary checked against the database.
 * Without --once the services stay up (dashboard URL printed) until Ctrl-C. See docs/demo.md.
 */
import { writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { parseDuration } from '@mcb/core/config';
import { coerceError } from '@mcb/core/errors';
import { Redis } from 'ioredis';
import pg from 'pg';
import { driveDemo, planOrders } from './lib/demo-driver.ts';
import { buildSummary, formatSummary } from './lib/demo-report.ts';
import { stackInputEnv } from './lib/env-file.ts';
import {
  ownServicesIfNeeded,
  readLocalSettings,
  startLocalStack,
  triggerHint,
  type LocalStack,
} from './lib/local-stack.ts';
import { stopOnSignals } from './lib/processes.ts';

const USAGE = `usage: pnpm demo [--once] [--orders N] [--free-ports] [--timeout 60s] [--summary-file FILE]

  --once            exit after the summary: status 0 only when every check held
  --orders N        orders to drive (10 to 5000, default 300)
  --free-ports      pick free ports instead of the contract ports (8080, 8081, 8090, 9464-9466)
  --timeout D       give up when the pipeline has not caught up after D (default 60s)
  --summary-file F  also write the summary as JSON to F

Environment: DEMO_DATABASE_URL (default database merchant_callbacks_demo on the DATABASE_URL server),
DEMO_QUEUE_PREFIX (default mcb-demo), DEMO_LOG_DIR (default .data/demo/logs), REDIS_URL, MCB_OWN_SERVICES (1: always
start own Postgres and Redis in .data/own-services/demo; 0: never; unset: when none is chosen and none answers), MERCHANT_NO, KEYS_DIR, CONSOLE_TOKEN, SANDBOX_TIME_SCALE (600),
INGEST_PORT, CONSOLE_PORT, SANDBOX_PORT, *_METRICS_PORT.`;

const root = resolve(import.meta.dirname, '..');
const tty = process.stdout.isTTY === true;
let lastStatus = 0;
function status(line: string): void {
  if (tty) process.stdout.write(`\r\x1b[2K${line}`);
  else if (Date.now() - lastStatus > 1000) {
    lastStatus = Date.now();
    console.log(line);
  }
}
function say(line: string): void {
  if (tty) process.stdout.write('\r\x1b[2K');
  console.log(line);
}

function parseOptions(): {
  once: boolean;
  orders: number;
  freePorts: boolean;
  timeoutMs: number;
  summaryFile?: string;
} {
  const { values } = parseArgs({
    options: {
      once: { type: 'boolean', default: false },
      orders: { type: 'string', default: '300' },
      'free-ports': { type: 'boolean', default: false },
      timeout: { type: 'string', default: '60s' },
      'summary-file': { type: 'string' },
      help: { type: 'boolean', short: 'h', default: false },
    },
    strict: true,
  });
  if (values.help) {
    console.log(USAGE);
    process.exit(0);
  }
  const orders = Number(values.orders);
  if (!Number.isInteger(orders) || orders < 10 || orders > 5000)
    throw new Error('--orders: expected a whole number from 10 to 5000');
  const timeoutMs = parseDuration(values.timeout);
  if (timeoutMs === undefined || timeoutMs < 1000) throw new Error('--timeout: expected a duration such as 60s or 2m');
  return { once: values.once, orders, freePorts: values['free-ports'], timeoutMs, summaryFile: values['summary-file'] };
}

let stack: LocalStack | undefined;
// Interrupted mid-run: 130/143. Once the summary is out, Ctrl-C is how the services are stopped: the run's own status.
const signalCodes = { SIGINT: 130, SIGTERM: 143 };
const exit = stopOnSignals(say, signalCodes);
const { started, shutdown } = exit;

let options;
try {
  options = parseOptions();
} catch (e) {
  console.error(`demo: ${coerceError(e).message}\n\n${USAGE}`);
  process.exit(2);
}

let exitCode = 1;
try {
  const input = await ownServicesIfNeeded(stackInputEnv(), 'demo', root, exit.services, say);
  const settings = readLocalSettings(input, 'demo', root);
  const logDir = resolve(root, process.env.DEMO_LOG_DIR?.trim() || join('.data', 'demo', 'logs'));
  stack = await startLocalStack(settings, {
    started,
    freePorts: options.freePorts,
    output: { kind: 'file', dir: logDir },
    say,
    inputEnv: input,
  });
  say(`services up (logs in ${logDir}); driving ${options.orders} orders at sandbox time scale ${settings.timeScale}`);
  const running = stack;
  // An app that dies mid-run is a failure of the run, whatever the driver is doing.
  void running.firstExit.then(({ name, code }) => {
    if (exit.stopping) return;
    say(`demo: ${name} exited unexpectedly (${code}); see ${join(logDir, `${name}.log`)}`);
    void shutdown(1);
  });

  const pool = new pg.Pool({ connectionString: settings.databaseUrl, max: 2 });
  pool.on('error', () => {});
  const redis = new Redis(settings.redisUrl, { maxRetriesPerRequest: 1, connectionName: 'mcb-demo' });
  redis.on('error', () => {});
  try {
    const plan = planOrders(options.orders);
    const progress = async () => {
      const { rows } = await pool.query<{ applied: number; reviews: number }>(
        `select (select count(*) from callback_receipts where merchant_order_no like $1)::int as applied,
                (select count(*) from reviews where merchant_order_no like $1)::int as reviews`,
        [`${plan.runId}-%`],
      );
      return rows[0] ?? { applied: 0, reviews: 0 };
    };
    const run = await driveDemo(
      {
        consoleUrl: running.urls.console,
        consoleToken: running.consoleToken,
        sandboxUrl: running.urls.sandbox,
        progress,
        status,
      },
      plan,
      options.timeoutMs,
    );
    say('');
    const summary = await buildSummary(pool, redis, settings.queuePrefix, run);
    console.log(formatSummary(summary));
    if (options.summaryFile) writeFileSync(options.summaryFile, `${JSON.stringify(summary, null, 2)}\n`);
    exitCode = summary.ok ? 0 : 1;
  } finally {
    await pool.end();
    redis.disconnect();
  }
  if (running.volatileRedis)
    say('NOTE: this demo ran on a volatile Redis; production needs the compose Redis (AOF, fsync always).');

  if (!options.once) {
    signalCodes.SIGINT = exitCode;
    signalCodes.SIGTERM = exitCode;
    say(
      [
        '',
        'The services stay up until Ctrl-C:',
        `  dashboard   ${running.urls.dashboard}   (bearer token: ${settings.consoleTokenGiven ? 'CONSOLE_TOKEN' : settings.consoleTokenFile})`,
        `  console API ${running.urls.console}/api/orders/<merchantOrderNo>`,
        `  ingest      ${running.urls.ingest}/callbacks/payin, /callbacks/payout`,
        `  sandbox     ${running.urls.sandbox}   try: ${triggerHint(running.urls.sandbox, running.envFileWritten)}`,
      ].join('\n'),
    );
    await running.firstExit;
  }
} catch (e) {
  say('');
  console.error(`demo: ${coerceError(e).message}`);
  exitCode = 1;
}
await shutdown(exitCode);
