/**
 * `pnpm demo [--once] [--orders N] [--merchants N] [--free-ports] [--timeout 60s] [--summary-file FILE]`: the whole
 * pipeline on this machine against the sandbox, a few hundred orders through it, a summary checked against the
 * database (one per merchant with --merchants). Without --once the services stay up (dashboard URL printed) until
 * Ctrl-C. See docs/demo.md.
 */
import { writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { parseDuration } from '@mcb/core/config';
import { coerceError } from '@mcb/core/errors';
import { Redis } from 'ioredis';
import pg from 'pg';
import { driveDemo, newRunId, planOrders, type DemoPlan, type DriverTargets } from './lib/demo-driver.ts';
import { MAX_LOCAL_MERCHANTS, parseMerchantCount, type LocalMerchant } from './lib/demo-merchants.ts';
import {
  buildSummary,
  formatMerchantSummaries,
  formatSummary,
  type DemoMerchantsSummary,
  type DemoSummary,
} from './lib/demo-report.ts';
import { stackInputEnv } from './lib/env-file.ts';
import {
  ownServicesIfNeeded,
  readLocalSettings,
  startLocalStack,
  triggerHint,
  type LocalStack,
} from './lib/local-stack.ts';
import { stopOnSignals } from './lib/processes.ts';

const USAGE = `usage: pnpm demo [--once] [--orders N] [--merchants N] [--free-ports] [--timeout 60s] [--summary-file FILE]

  --once            exit after the summary: status 0 only when every check held
  --orders N        orders to drive (10 to 5000, default 300), shared among the merchants
  --merchants N     merchant numbers (1 to ${MAX_LOCAL_MERCHANTS}, default 1): each its own key pair, sandbox account, route
                    and queue (MERCHANTS_FILE written in KEYS_DIR); the summary is per merchant
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
  merchants: number;
  freePorts: boolean;
  timeoutMs: number;
  summaryFile?: string;
} {
  const { values } = parseArgs({
    options: {
      once: { type: 'boolean', default: false },
      orders: { type: 'string', default: '300' },
      merchants: { type: 'string', default: '1' },
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
  const merchants = parseMerchantCount(values.merchants);
  return {
    once: values.once,
    orders,
    merchants,
    freePorts: values['free-ports'],
    timeoutMs,
    summaryFile: values['summary-file'],
  };
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
    merchants: options.merchants,
  });
  say(
    `services up (logs in ${logDir}); driving ${options.orders} orders` +
      (options.merchants > 1 ? ` for ${options.merchants} merchants` : '') +
      ` at sandbox time scale ${settings.timeScale}`,
  );
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
    /** Drive `plan` (of `merchant`, with several) and summarise it. */
    const runPlan = async (plan: DemoPlan, merchant?: LocalMerchant, line = status): Promise<DemoSummary> => {
      const progress = async () => {
        const { rows } = await pool.query<{ applied: number; reviews: number }>(
          `select (select count(*) from callback_receipts where merchant_order_no like $1)::int as applied,
                  (select count(*) from reviews where merchant_order_no like $1)::int as reviews`,
          [`${plan.runId}-%`],
        );
        return rows[0] ?? { applied: 0, reviews: 0 };
      };
      const targets: DriverTargets = {
        ...(merchant ? { merchant: merchant.ref } : {}),
        consoleUrl: running.urls.console,
        consoleToken: running.consoleToken,
        sandboxUrl: running.urls.sandbox,
        progress,
        status: line,
      };
      const run = await driveDemo(targets, plan, options.timeoutMs);
      const whose = merchant && { ref: merchant.ref, merchantNo: merchant.merchantNo };
      return buildSummary(pool, redis, settings.queuePrefix, run, whose);
    };
    let report: DemoSummary | DemoMerchantsSummary;
    if (running.merchants.length === 1) {
      const summary = await runPlan(planOrders(options.orders));
      say('');
      console.log(formatSummary(summary));
      report = summary;
    } else {
      // Every merchant's orders at once, as their shops and customers would: one run id, a part of it each.
      const runId = newRunId();
      const each = Math.max(5, Math.ceil(options.orders / running.merchants.length));
      const lines = new Map<string, string>();
      const summaries = await Promise.all(
        running.merchants.map((m) =>
          runPlan(planOrders(each, `${runId}${m.ref.toUpperCase()}`), m, (line) => {
            lines.set(m.ref, `${m.ref}: ${line}`);
            status([...lines.values()].join(' | '));
          }),
        ),
      );
      say('');
      console.log(formatMerchantSummaries(summaries));
      report = { merchants: summaries, ok: summaries.every((x) => x.ok) };
    }
    if (options.summaryFile) writeFileSync(options.summaryFile, `${JSON.stringify(report, null, 2)}\n`);
    exitCode = report.ok ? 0 : 1;
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
        running.merchants.length === 1
          ? `  ingest      ${running.urls.ingest}/callbacks/payin, /callbacks/payout`
          : `  ingest      ${running.urls.ingest}/callbacks/m/{${running.merchants.map((m) => m.ref).join('|')}}/payin, .../payout`,
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
