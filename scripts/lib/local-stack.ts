/**
 * The whole pipeline on this machine, for `pnpm dev` and `pnpm demo`: check Postgres and Redis, make keys and the
 * console token, migrate, then start sandbox, ingest, worker and console as child processes and wait until each
 * answers. `stop()` ends them in reverse order.
 */
import type { DurabilityReport } from '@mcb/core/redis';
import { ownServicesFolder, planOwnServices, startOwnServices } from '@mcb/testkit/own-services';
import { LOOSENINGS, stackInputEnv, writeLocalEnvFile } from './env-file.ts';
import {
  childEnv,
  DEMO_DATABASE_NAME,
  ensureConsoleToken,
  ensureKeys,
  settlePorts,
  type LocalSettings,
  type StackMode,
  type StackPorts,
} from './local-env.ts';
import { localMerchants, writeLocalMerchantsFile, type LocalMerchant } from './demo-merchants.ts';
import { migrate, redisDurability, requireServices, volatileRedisWarning } from './preflight.ts';
import {
  APP_NAMES,
  spawnApp,
  stopAll,
  waitReady,
  type AppName,
  type AppProcess,
  type OutputMode,
} from './processes.ts';

export { stopAll, type AppProcess } from './processes.ts';
export { readLocalSettings, type LocalSettings, type StackMode, type StackPorts } from './local-env.ts';

/** Options of {@link startLocalStack}. */
export interface StartOptions {
  /** Replace ports not set in the environment by free ones. @defaultValue false (contract ports) */
  freePorts?: boolean;
  /** Print every app's trace spans with its output (OTEL_TRACES_EXPORTER=console). @defaultValue false */
  traces?: boolean;
  /** Where app output goes. */
  output: OutputMode;
  /** Progress messages ("migrating", "starting ingest"). */
  say: (line: string) => void;
  /** How long one app may take to answer, in ms. @defaultValue 30000 */
  readyTimeoutMs?: number;
  /** Receives each app as it is spawned, so a caller interrupted during start-up (Ctrl-C) can stop them. */
  started?: AppProcess[];
  /** The environment the settings were read from (with {@link ownServicesIfNeeded}'s URLs). @defaultValue stackInputEnv() */
  inputEnv?: Record<string, string | undefined>;
  /**
   * Merchant numbers to run: 1 is MERCHANT_NO as always; more get a key pair each and a MERCHANTS_FILE in the keys
   * folder (demo-merchants.ts). @defaultValue 1
   */
  merchants?: number;
}

/** URLs of a running stack. */
export interface StackUrls {
  sandbox: string;
  ingest: string;
  console: string;
  /** The queue dashboard (served by the console). */
  dashboard: string;
  ingestMetrics: string;
  workerMetrics: string;
  consoleMetrics: string;
}

/** A running local stack. */
export interface LocalStack {
  settings: LocalSettings;
  ports: StackPorts;
  urls: StackUrls;
  consoleToken: string;
  keysGenerated: boolean;
  durability: DurabilityReport;
  /** The merchants the apps serve (one `default` without MERCHANTS_FILE). */
  merchants: LocalMerchant[];
  /** The MERCHANTS_FILE the apps read; undefined with one merchant. */
  merchantsFile: string | undefined;
  /** The `.env` file written for commands in another shell; undefined when a user's own file is there (or files are off). */
  envFileWritten: string | undefined;
  /** Ingest runs with INGEST_ALLOW_VOLATILE_REDIS=true because Redis is not durable. */
  volatileRedis: boolean;
  procs: AppProcess[];
  /** Resolves with the first app that exits while the stack is meant to be running. */
  firstExit: Promise<{ name: AppName; code: number | string }>;
  stop(): Promise<void>;
}

function urlsOf(ports: StackPorts): StackUrls {
  const at = (port: number) => `http://127.0.0.1:${port}`;
  return {
    sandbox: at(ports.sandbox),
    ingest: at(ports.ingest),
    console: at(ports.console),
    dashboard: `${at(ports.console)}/queues`,
    ingestMetrics: at(ports.ingestMetrics),
    workerMetrics: at(ports.workerMetrics),
    consoleMetrics: at(ports.consoleMetrics),
  };
}

/** Where each app says it is ready. */
function readyUrl(name: AppName, urls: StackUrls): string {
  switch (name) {
    case 'sandbox':
      return `${urls.sandbox}/healthz`;
    case 'ingest':
      return `${urls.ingest}/readyz`;
    case 'worker':
      return `${urls.workerMetrics}/healthz`;
    case 'console':
      return `${urls.consoleMetrics}/healthz`;
  }
}

/**
 * The command to try in another shell: with the stack's `.env` written nothing needs exporting; beside a user's own
 * `.env` (not rewritten) the sandbox's URL is given on the command line.
 */
export function triggerHint(sandboxUrl: string, envFileWritten: string | undefined): string {
  const command = 'pnpm sandbox trigger payin --currency INR --amount 1000';
  return envFileWritten ? command : `SANDBOX_URL=${sandboxUrl} ${command}`;
}

/** Settings that choose a Postgres or a Redis: when one is set, the stack uses it and starts none of its own. */
const SERVICE_CHOICES = [
  'DATABASE_URL',
  'DEMO_DATABASE_URL',
  'REDIS_URL',
  'REDIS_SENTINELS',
  'REDIS_CLUSTER_NODES',
] as const;

/**
 * Own Postgres and Redis for dev and demo (@mcb/testkit/own-services): when none was chosen (`input`: the
 * environment and a user's own .env) and none answers at the defaults, or with MCB_OWN_SERVICES=1, start them in
 * `.data/own-services/<mode>/`, say so in one line, and return `input` pointing at them. `services` receives them:
 * the script stops them after the apps (stopOnSignals).
 */
export async function ownServicesIfNeeded(
  input: Record<string, string | undefined>,
  mode: StackMode,
  root: string,
  services: { stop(): Promise<void> }[],
  say: (line: string) => void,
): Promise<Record<string, string | undefined>> {
  const chosen = SERVICE_CHOICES.filter(
    (name) => (mode === 'demo' || name !== 'DEMO_DATABASE_URL') && input[name]?.trim(),
  );
  const plan = await planOwnServices(input, chosen);
  if (!plan) return input;
  const own = await startOwnServices({
    plan,
    folder: ownServicesFolder(root, mode, input),
    command: mode,
    durable: true,
    started: services,
  });
  say(own.line);
  const env = { ...input };
  if (own.databaseUrl) {
    const u = new URL(own.databaseUrl);
    u.pathname = `/${mode === 'demo' ? DEMO_DATABASE_NAME : 'merchant_callbacks'}`;
    env.DATABASE_URL = u.toString();
    delete env.DEMO_DATABASE_URL;
  }
  if (own.redisUrl) {
    env.REDIS_URL = own.redisUrl;
    for (const name of ['REDIS_SENTINELS', 'REDIS_SENTINEL_NAME', 'REDIS_CLUSTER_NODES']) delete env[name];
  }
  return env;
}

/**
 * Preflight and start. On any failure everything started so far is stopped and the error is rethrown; its
 * message says what to do (start Postgres/Redis, free a port, read an app's log).
 */
export async function startLocalStack(settings: LocalSettings, opts: StartOptions): Promise<LocalStack> {
  const { say } = opts;
  await requireServices(settings.databaseUrl, settings.redisUrl);
  const durability = await redisDurability(settings.redisUrl);
  const volatileRedis = !durability.durable;
  if (volatileRedis) say(volatileRedisWarning(durability));

  const merchants = localMerchants(settings, opts.merchants ?? 1);
  let merchantsFile: string | undefined;
  let keysGenerated: boolean;
  if (merchants.length === 1) {
    const keys = ensureKeys(settings);
    keysGenerated = keys.generated;
    if (keys.generated)
      say(
        `generated a merchant key pair in ${keys.privateKeyFile.replace(/-private\.pem$/, '-*')} (private key mode 0600)`,
      );
  } else {
    const written = writeLocalMerchantsFile(settings, merchants);
    merchantsFile = written.file;
    keysGenerated = written.generated.length > 0;
    for (const m of merchants.filter((x) => written.generated.includes(x.ref)))
      say(`generated merchant ${m.ref}'s key pair in ${m.privateKeyFile.replace(/-private\.pem$/, '-*')} (mode 0600)`);
    say(`merchants ${merchants.map((m) => `${m.ref} (${m.merchantNo})`).join(', ')}: MERCHANTS_FILE ${merchantsFile}`);
  }
  const consoleToken = ensureConsoleToken(settings);

  const db = new URL(settings.databaseUrl);
  // Several merchants: no default merchant number, and the single-merchant indexes dropped (a local database has no
  // process of an older release to wait for; docs/deployment.md "Several merchant numbers").
  const migrated = await migrate(settings.databaseUrl, merchantsFile ? null : settings.merchantNo, {
    finishMerchants: merchantsFile !== undefined,
  });
  say(
    `database ${db.pathname.slice(1)} on ${db.host}: ${migrated.createdDatabase ? 'created, ' : ''}` +
      `${migrated.applied} migration(s) applied`,
  );

  const ports = await settlePorts(settings, opts.freePorts ?? false);
  const urls = urlsOf(ports);
  // The apps get the real environment (not a previous run's settings from the stack's own .env) and the stack's.
  const env = childEnv(
    settings,
    ports,
    { consoleToken, allowVolatileRedis: volatileRedis, merchantsFile },
    opts.inputEnv ?? stackInputEnv(),
  );
  // The local stack's logs are read by a person (`pnpm dev` on the terminal, `pnpm demo` in its log files):
  // pino-pretty, coloured when dev's terminal is, unless LOG_FORMAT says otherwise.
  if (opts.traces) env.OTEL_TRACES_EXPORTER = 'console';
  if (!process.env.LOG_FORMAT) {
    env.LOG_FORMAT = 'pretty';
    if (opts.output.kind === 'prefix' && process.stdout.isTTY && !process.env.NO_COLOR) env.FORCE_COLOR = '1';
  }
  const written = writeLocalEnvFile(
    [
      `Last written by \`pnpm ${settings.mode}\`: where its stack is, for \`pnpm cli\`, \`pnpm sandbox\` and \`pnpm db:migrate\` in another shell.`,
      'pnpm dev and pnpm demo do not read their settings from it; remove the first line to make the file yours (then they do,',
      'and never rewrite it). It holds no setting that loosens a check: those are never read from a file.',
      'The real environment wins over it. Every setting and its default: .env.example.',
    ],
    localEnvValues(env),
  );
  if (written) say(`wrote ${written}: \`pnpm cli\` and \`pnpm sandbox\` in another shell now reach this stack`);
  const procs: AppProcess[] = opts.started ?? [];
  const stop = () => stopAll(procs);
  try {
    for (const name of APP_NAMES) {
      say(`starting ${name}`);
      const proc = spawnApp(name, settings.root, env, opts.output);
      procs.push(proc);
      await waitReady(proc, readyUrl(name, urls), opts.readyTimeoutMs ?? 30_000);
    }
  } catch (e) {
    await stop();
    throw e;
  }
  const firstExit = Promise.race(procs.map((p) => p.exited.then((code) => ({ name: p.name, code }))));
  return {
    settings,
    ports,
    urls,
    consoleToken,
    envFileWritten: written,
    keysGenerated,
    merchants,
    merchantsFile,
    durability,
    volatileRedis,
    procs,
    firstExit,
    stop,
  };
}

/**
 * The settings a command in another shell needs to reach the local stack (what `.env` gets). Never a loosening
 * (PLATFORM_ALLOW_HTTP, INGEST_ALLOW_VOLATILE_REDIS): a `pnpm start:*` in this checkout must not inherit one.
 */
const LOCAL_ENV_NAMES = [
  'DATABASE_URL',
  'REDIS_URL',
  'QUEUE_PREFIX',
  'MERCHANT_NO',
  'MERCHANT_PRIVATE_KEY_FILE',
  'MERCHANTS_FILE',
  'PLATFORM_BASE_URL',
  'CONSOLE_TOKEN',
  'INGEST_HOST',
  'INGEST_PORT',
  'INGEST_METRICS_PORT',
  'WORKER_METRICS_PORT',
  'CONSOLE_HOST',
  'CONSOLE_PORT',
  'CONSOLE_METRICS_PORT',
  'SANDBOX_HOST',
  'SANDBOX_PORT',
  'SANDBOX_URL',
  'SANDBOX_PAYIN_CALLBACK_URL',
  'SANDBOX_PAYOUT_CALLBACK_URL',
  'SANDBOX_TIME_SCALE',
] as const;

function localEnvValues(env: Record<string, string>): Record<string, string> {
  return Object.fromEntries(
    LOCAL_ENV_NAMES.filter((n) => env[n] !== undefined && !LOOSENINGS.includes(n)).map((n) => [n, env[n]!]),
  );
}
