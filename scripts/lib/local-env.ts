/**
 * Local settings shared by `pnpm dev` and `pnpm demo`: where Postgres, Redis and the keys are, which ports the four
 * apps use, and the environment each child process gets. Read once from the parent's environment; the apps
 * themselves still validate what they receive with their own config schema.
 */
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { dirname, join, resolve } from 'node:path';
import { generateKeyPair } from '@mcb/core/callback';

/** Which command is running: they differ in database, queue prefix and time scale defaults. */
export type StackMode = 'dev' | 'demo';

/** Listeners of the four apps (the `*_metrics` ones are ops listeners, never public). */
export interface StackPorts {
  ingest: number;
  console: number;
  sandbox: number;
  ingestMetrics: number;
  workerMetrics: number;
  consoleMetrics: number;
}

/** Everything the local stack needs to start the apps. */
export interface LocalSettings {
  mode: StackMode;
  /** Repository root (apps are started from here). */
  root: string;
  databaseUrl: string;
  redisUrl: string;
  queuePrefix: string;
  merchantNo: string;
  /** The merchant's private key file (PEM); generated when missing unless it was given explicitly. */
  privateKeyFile: string;
  /** Whether {@link privateKeyFile} came from MERCHANT_PRIVATE_KEY_FILE (then it is never generated). */
  privateKeyGiven: boolean;
  /** Bearer token of the console, from CONSOLE_TOKEN or a file kept next to the keys. */
  consoleTokenFile: string;
  consoleTokenGiven: string | undefined;
  ports: StackPorts;
  /** Ports that came from the environment (never replaced by free ones). */
  portsGiven: ReadonlySet<keyof StackPorts>;
  /** Sandbox time scale (600: the 3-minute retry gap takes 0.3 s). */
  timeScale: number;
  /** Log level of the apps. */
  logLevel: string;
}

/** Contract ports (docs/design.md) and the apps' metrics defaults. */
export const CONTRACT_PORTS: Readonly<StackPorts> = Object.freeze({
  ingest: 8080,
  console: 8081,
  sandbox: 8090,
  ingestMetrics: 9464,
  workerMetrics: 9465,
  consoleMetrics: 9466,
});

/** Environment variable of each port. */
export const PORT_VARIABLES: Readonly<Record<keyof StackPorts, string>> = Object.freeze({
  ingest: 'INGEST_PORT',
  console: 'CONSOLE_PORT',
  sandbox: 'SANDBOX_PORT',
  ingestMetrics: 'INGEST_METRICS_PORT',
  workerMetrics: 'WORKER_METRICS_PORT',
  consoleMetrics: 'CONSOLE_METRICS_PORT',
});

/** Host each listener binds (the worker's metrics server binds all interfaces). */
export const PORT_HOSTS: Readonly<Record<keyof StackPorts, string>> = Object.freeze({
  ingest: '127.0.0.1',
  console: '127.0.0.1',
  sandbox: '127.0.0.1',
  ingestMetrics: '127.0.0.1',
  workerMetrics: '0.0.0.0',
  consoleMetrics: '127.0.0.1',
});

const DEFAULT_DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/merchant_callbacks';
/** The demo's own database on the same server, so it never mixes with `pnpm dev` data. */
export const DEMO_DATABASE_NAME = 'merchant_callbacks_demo';
/** The demo's own BullMQ prefix. */
export const DEMO_QUEUE_PREFIX = 'mcb-demo';

function withDatabase(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

function text(env: Record<string, string | undefined>, name: string): string | undefined {
  const v = env[name]?.trim();
  return v ? v : undefined;
}

/**
 * Settings from the environment, with the local defaults. Throws one Error naming every bad value.
 * Demo: `DEMO_DATABASE_URL` (default: the DATABASE_URL server, database `merchant_callbacks_demo`) and
 * `DEMO_QUEUE_PREFIX` (default `mcb-demo`); dev: `DATABASE_URL` and `QUEUE_PREFIX` as the apps read them.
 */
export function readLocalSettings(
  env: Record<string, string | undefined>,
  mode: StackMode,
  root: string,
): LocalSettings {
  const problems: string[] = [];
  const baseDb = text(env, 'DATABASE_URL') ?? DEFAULT_DATABASE_URL;
  const databaseUrl =
    mode === 'demo' ? (text(env, 'DEMO_DATABASE_URL') ?? withDatabase(baseDb, DEMO_DATABASE_NAME)) : baseDb;
  const redisUrl = text(env, 'REDIS_URL') ?? 'redis://127.0.0.1:6379';
  for (const [name, url, protocols] of [
    ['DATABASE_URL', databaseUrl, ['postgres:', 'postgresql:']],
    ['REDIS_URL', redisUrl, ['redis:', 'rediss:']],
  ] as const) {
    try {
      if (!(protocols as readonly string[]).includes(new URL(url).protocol))
        problems.push(`${name}: expected ${protocols.join(' or ')} URL`);
    } catch {
      problems.push(`${name}: not a URL`);
    }
  }
  const ports = { ...CONTRACT_PORTS };
  const portsGiven = new Set<keyof StackPorts>();
  for (const key of Object.keys(PORT_VARIABLES) as (keyof StackPorts)[]) {
    const raw = text(env, PORT_VARIABLES[key]);
    if (raw === undefined) continue;
    const n = Number(raw);
    if (!/^\d+$/.test(raw) || n < 1 || n > 65_535)
      problems.push(`${PORT_VARIABLES[key]}: expected a port 1-65535 (got ${JSON.stringify(raw)})`);
    else {
      ports[key] = n;
      portsGiven.add(key);
    }
  }
  const scaleRaw = text(env, 'SANDBOX_TIME_SCALE') ?? (mode === 'demo' ? '600' : '60');
  const timeScale = Number(scaleRaw);
  if (!(timeScale > 0 && timeScale <= 1_000_000))
    problems.push(`SANDBOX_TIME_SCALE: expected a number > 0 (got ${JSON.stringify(scaleRaw)})`);
  const keysDir = resolve(root, text(env, 'KEYS_DIR') ?? 'keys');
  const givenKey = text(env, 'MERCHANT_PRIVATE_KEY_FILE')?.split(',')[0]?.trim();
  if (problems.length > 0) throw new Error(`invalid settings:\n  - ${problems.join('\n  - ')}`);
  return {
    mode,
    root,
    databaseUrl,
    redisUrl,
    queuePrefix:
      mode === 'demo' ? (text(env, 'DEMO_QUEUE_PREFIX') ?? DEMO_QUEUE_PREFIX) : (text(env, 'QUEUE_PREFIX') ?? 'mcb'),
    merchantNo: text(env, 'MERCHANT_NO') ?? 'M100001',
    privateKeyFile: givenKey ? resolve(root, givenKey) : join(keysDir, 'merchant-private.pem'),
    privateKeyGiven: givenKey !== undefined,
    consoleTokenFile: join(keysDir, 'console-token'),
    consoleTokenGiven: text(env, 'CONSOLE_TOKEN'),
    ports,
    portsGiven,
    timeScale,
    logLevel: text(env, 'LOG_LEVEL') ?? 'info',
  };
}

/** What {@link ensureKeys} found or did. */
export interface KeySetup {
  privateKeyFile: string;
  generated: boolean;
}

/**
 * The merchant key pair: generated into the keys folder (private 0600, public PEM and Base64 DER) when none
 * exists there. A key named by MERCHANT_PRIVATE_KEY_FILE must exist; it is never generated or overwritten.
 */
export function ensureKeys(settings: LocalSettings): KeySetup {
  const file = settings.privateKeyFile;
  if (existsSync(file)) return { privateKeyFile: file, generated: false };
  if (settings.privateKeyGiven)
    throw new Error(
      `MERCHANT_PRIVATE_KEY_FILE: ${file} does not exist (unset it to have a key pair generated in keys/)`,
    );
  ensureKeyPair(file);
  return { privateKeyFile: file, generated: true };
}

/**
 * A key pair at `file` (`*-private.pem`, mode 0600) with its public halves beside it (`*-public.pem`,
 * `*-public.b64.txt`), generated when the private key is missing; whether it was.
 */
export function ensureKeyPair(file: string): boolean {
  if (existsSync(file)) return false;
  const pair = generateKeyPair(2048);
  mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
  writeFileSync(file, pair.privateKeyPem, { mode: 0o600, flag: 'wx' });
  const base = file.replace(/-private\.pem$/, '');
  writeFileSync(`${base}-public.pem`, pair.publicKeyPem, { mode: 0o644 });
  writeFileSync(`${base}-public.b64.txt`, `${pair.publicKeyBase64}\n`, { mode: 0o644 });
  return true;
}

/** The console token: CONSOLE_TOKEN, else the one kept in keys/console-token (created once, mode 0600). */
export function ensureConsoleToken(settings: LocalSettings): string {
  if (settings.consoleTokenGiven) {
    if (settings.consoleTokenGiven.length < 16) throw new Error('CONSOLE_TOKEN: expected at least 16 characters');
    return settings.consoleTokenGiven;
  }
  const file = settings.consoleTokenFile;
  if (existsSync(file)) {
    const token = readFileSync(file, 'utf8').trim();
    if (token.length >= 16) return token;
  }
  const token = randomBytes(24).toString('base64url');
  mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
  writeFileSync(file, `${token}\n`, { mode: 0o600 });
  chmodSync(file, 0o600);
  return token;
}

/** Whether `port` can be bound on `host` right now. */
export function portIsFree(port: number, host: string): Promise<boolean> {
  return new Promise((resolvePromise) => {
    const server = net.createServer();
    server.once('error', () => resolvePromise(false));
    server.listen({ port, host, exclusive: true }, () => server.close(() => resolvePromise(true)));
  });
}

/** A port the OS says is free now. */
export function freePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolvePromise, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen({ port: 0, host }, () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolvePromise(port));
    });
  });
}

/**
 * Make sure every listener can bind. With `pickFree`, ports not set in the environment are replaced by free ones;
 * otherwise a taken port is an error that names it and says how to choose another.
 */
export async function settlePorts(settings: LocalSettings, pickFree: boolean): Promise<StackPorts> {
  const ports = { ...settings.ports };
  const taken: string[] = [];
  for (const key of Object.keys(ports) as (keyof StackPorts)[]) {
    if (pickFree && !settings.portsGiven.has(key)) {
      ports[key] = await freePort(PORT_HOSTS[key]);
      continue;
    }
    if (!(await portIsFree(ports[key], PORT_HOSTS[key]))) taken.push(`${PORT_VARIABLES[key]}=${ports[key]} (${key})`);
  }
  if (taken.length > 0) {
    throw new Error(
      `port already in use: ${taken.join(', ')}.\n` +
        `Stop whatever holds it (another \`pnpm dev\`/\`pnpm demo\`? \`ss -ltnp | grep <port>\`), ` +
        (pickFree
          ? 'or set the variable to a free port: it is set in the environment (or in your own .env), and --free-ports replaces only the ports nobody chose.'
          : 'set the variable to another port, or pass --free-ports to pick free ones.'),
    );
  }
  return ports;
}

/**
 * The environment of the child processes: the parent's, overridden by the stack's settings. With `merchantsFile`
 * (several merchants) the apps and the sandbox read their merchants from it instead of MERCHANT_NO.
 */
export function childEnv(
  settings: LocalSettings,
  ports: StackPorts,
  extra: { consoleToken: string; allowVolatileRedis: boolean; merchantsFile?: string },
  parent: Record<string, string | undefined> = process.env,
): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(parent)) if (v !== undefined) env[k] = v;
  const ingestBase = `http://127.0.0.1:${ports.ingest}`;
  Object.assign(env, {
    DATABASE_URL: settings.databaseUrl,
    REDIS_URL: settings.redisUrl,
    QUEUE_PREFIX: settings.queuePrefix,
    MERCHANT_NO: settings.merchantNo,
    MERCHANT_PRIVATE_KEY_FILE: settings.privateKeyFile,
    PLATFORM_BASE_URL: `http://127.0.0.1:${ports.sandbox}`,
    // The local sandbox speaks plain http; production requires https (every start warns).
    PLATFORM_ALLOW_HTTP: 'true',
    CONSOLE_TOKEN: extra.consoleToken,
    LOG_LEVEL: settings.logLevel,
    INGEST_HOST: '127.0.0.1',
    INGEST_PORT: String(ports.ingest),
    INGEST_METRICS_PORT: String(ports.ingestMetrics),
    INGEST_WORKERS: '1',
    INGEST_ALLOW_VOLATILE_REDIS: extra.allowVolatileRedis ? 'true' : 'false',
    WORKER_METRICS_PORT: String(ports.workerMetrics),
    CONSOLE_HOST: '127.0.0.1',
    CONSOLE_PORT: String(ports.console),
    CONSOLE_METRICS_PORT: String(ports.consoleMetrics),
    SANDBOX_HOST: '127.0.0.1',
    SANDBOX_PORT: String(ports.sandbox),
    SANDBOX_URL: `http://127.0.0.1:${ports.sandbox}`,
    SANDBOX_MERCHANT_NO: settings.merchantNo,
    SANDBOX_PAYIN_CALLBACK_URL: `${ingestBase}/callbacks/payin`,
    SANDBOX_PAYOUT_CALLBACK_URL: `${ingestBase}/callbacks/payout`,
    SANDBOX_TIME_SCALE: String(settings.timeScale),
  });
  // The sandbox derives the public key from our private key file; a stale explicit public key would not match.
  delete env.SANDBOX_MERCHANT_PUBLIC_KEY_FILE;
  if (extra.merchantsFile) {
    // MERCHANTS_FILE replaces MERCHANT_NO and its key (both set refuses to start); each merchant's callbacks go to
    // its own route (`{ref}` is the sandbox account's ref).
    for (const name of ['MERCHANT_NO', 'MERCHANT_PRIVATE_KEY_FILE', 'SANDBOX_MERCHANT_NO']) delete env[name];
    env.MERCHANTS_FILE = extra.merchantsFile;
    env.SANDBOX_PAYIN_CALLBACK_URL = `${ingestBase}/callbacks/m/{ref}/payin`;
    env.SANDBOX_PAYOUT_CALLBACK_URL = `${ingestBase}/callbacks/m/{ref}/payout`;
  }
  return env;
}
