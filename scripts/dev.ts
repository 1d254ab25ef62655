/**
 * `pnpm dev [--free-ports] [--traces] [--merchants N]`: sandbox, ingest, worker and console on this machine against the
 * local Postgres and Redis, logs prefixed with the app's name (and, with --traces, every trace span), until Ctrl-C
 * (then stopped in reverse order). Uses the contract defaults (database merchant_callbacks, QUEUE_PREFIX mcb, ports
 * 8080/8081/8090); with --merchants N (or DEV_MERCHANTS=N), N merchant numbers through a MERCHANTS_FILE in KEYS_DIR.
 * See docs/demo.md.
 */
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { coerceError } from '@mcb/core/errors';
import { parseMerchantCount } from './lib/demo-merchants.ts';
import { stackInputEnv } from './lib/env-file.ts';
import {
  ownServicesIfNeeded,
  readLocalSettings,
  startLocalStack,
  triggerHint,
  type LocalStack,
} from './lib/local-stack.ts';
import { stopOnSignals } from './lib/processes.ts';

const root = resolve(import.meta.dirname, '..');
let stack: LocalStack | undefined;
const exit = stopOnSignals((line) => console.log(`dev: ${line}`), { SIGINT: 0, SIGTERM: 0 });
const { started, shutdown } = exit;

const USAGE = `usage: pnpm dev [--free-ports] [--traces] [--merchants N]

  --free-ports    pick free ports instead of the contract ports (8080, 8081, 8090, 9464-9466)
  --traces        print every trace span
  --merchants N   merchant numbers (1 to 8, default 1, or DEV_MERCHANTS): each its own key pair, sandbox account,
                  route and queue (MERCHANTS_FILE written in KEYS_DIR)

Runs sandbox, ingest, worker and console against the local Postgres and Redis until Ctrl-C (docs/demo.md).`;

let freePorts = false;
let traces = false;
let merchants = 1;
try {
  const { values } = parseArgs({
    options: {
      'free-ports': { type: 'boolean', default: false },
      traces: { type: 'boolean', default: false },
      merchants: { type: 'string', default: process.env.DEV_MERCHANTS?.trim() || '1' },
      help: { type: 'boolean', default: false },
    },
    strict: true,
  });
  if (values.help) {
    console.log(USAGE);
    process.exit(0);
  }
  freePorts = values['free-ports'];
  traces = values.traces;
  merchants = parseMerchantCount(values.merchants);
} catch (e) {
  console.error(`dev: ${coerceError(e).message}\n${USAGE}`);
  process.exit(2);
}

try {
  const say = (line: string) => console.log(`dev: ${line}`);
  const input = await ownServicesIfNeeded(stackInputEnv(), 'dev', root, exit.services, say);
  const settings = readLocalSettings(input, 'dev', root);
  stack = await startLocalStack(settings, {
    inputEnv: input,
    started,
    freePorts,
    traces,
    merchants,
    output: { kind: 'prefix', write: (line) => console.log(line) },
    say,
  });
  const u = stack.urls;
  console.log(
    [
      'dev: all four apps are up (Ctrl-C stops them):',
      stack.merchants.length === 1
        ? `  ingest    ${u.ingest}/callbacks/payin, /callbacks/payout   (metrics ${u.ingestMetrics}/metrics)`
        : `  ingest    ${u.ingest}/callbacks/m/{ref}/payin, .../payout for ${stack.merchants.map((m) => `${m.ref} (${m.merchantNo})`).join(', ')}   (metrics ${u.ingestMetrics}/metrics)`,
      `  console   ${u.console}/api   dashboard ${u.dashboard}   (bearer token: ${settings.consoleTokenGiven ? 'CONSOLE_TOKEN' : settings.consoleTokenFile})`,
      `  sandbox   ${u.sandbox}   time scale ${settings.timeScale}   try: ${triggerHint(u.sandbox, stack.envFileWritten)}` +
        (stack.merchants.length > 1 ? ` --merchant ${stack.merchants[1]!.ref}` : ''),
      `  worker    metrics ${u.workerMetrics}/metrics`,
      stack.volatileRedis
        ? 'dev: NOTE: volatile Redis; ingest runs with INGEST_ALLOW_VOLATILE_REDIS=true (never in production).'
        : '',
    ]
      .filter(Boolean)
      .join('\n'),
  );
  const { name, code } = await stack.firstExit;
  if (!exit.stopping) {
    console.error(`dev: ${name} exited (${code}); stopping the others`);
    await shutdown(1);
  }
} catch (e) {
  console.error(`dev: ${coerceError(e).message}`);
  await shutdown(1);
}
