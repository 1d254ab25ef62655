/**
 * `pnpm dev [--free-ports] [--traces]`: sandbox, ingest, worker and console on this machine against the local Postgres
 * and Redis, logs prefixed with the app's name (and, with --traces, every trace span), until Ctrl-C (then stopped in
 * reverse order). Uses the contract
 * defaults (database merchant_callbacks, QUEUE_PREFIX mcb, ports 8080/8081/8090); see docs/demo.md.
 */
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { coerceError } from '@mcb/core/errors';
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

let freePorts = false;
let traces = false;
try {
  const { values } = parseArgs({
    options: { 'free-ports': { type: 'boolean', default: false }, traces: { type: 'boolean', default: false } },
    strict: true,
  });
  freePorts = values['free-ports'];
  traces = values.traces;
} catch (e) {
  console.error(`dev: ${coerceError(e).message}\nusage: pnpm dev [--free-ports] [--traces]`);
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
    output: { kind: 'prefix', write: (line) => console.log(line) },
    say,
  });
  const u = stack.urls;
  console.log(
    [
      'dev: all four apps are up (Ctrl-C stops them):',
      `  ingest    ${u.ingest}/callbacks/payin, /callbacks/payout   (metrics ${u.ingestMetrics}/metrics)`,
      `  console   ${u.console}/api   dashboard ${u.dashboard}   (bearer token: ${settings.consoleTokenGiven ? 'CONSOLE_TOKEN' : settings.consoleTokenFile})`,
      `  sandbox   ${u.sandbox}   time scale ${settings.timeScale}   try: ${triggerHint(u.sandbox, stack.envFileWritten)}`,
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
