import type { Redis } from 'ioredis';
import { dataNodesOf as nodesOf, nodeAddressOf as addressOf, type RedisClient } from './redis-nodes.ts';

/** How acknowledged writes are made durable on this Redis. */
export type DurabilityMode = 'aof-always' | 'waitaof' | 'none';

/** What {@link checkRedisDurability} found. */
export interface DurabilityReport {
  /** Acknowledged writes survive a Redis crash (per `mode`) and queue data is never evicted. */
  durable: boolean;
  /**
   * - `aof-always`: AOF with `appendfsync always`; Redis fsyncs before it replies, so an acknowledged add is on disk.
   * - `waitaof`: AOF on with a laxer fsync, but the server has `WAITAOF` (Redis ≥ 7.2): call it after each add.
   * - `none`: neither; acknowledged writes can be lost.
   */
  mode: DurabilityMode;
  /** One line per unsafe setting, each naming the setting, its value and the fix. Empty when durable. */
  problems: string[];
  /** The settings as read (`unknown` when the server hides them). */
  settings: { appendonly: string; appendfsync: string; maxmemoryPolicy: string; waitaof: boolean };
  /**
   * Replicas online against `minReplicas` (INGEST_MIN_REPLICAS); on a cluster, the fewest any master has. Kept apart
   * from `durable`: a replica that is offline for a while is a reason to refuse callbacks (503) and fail readiness,
   * not a configuration error to refuse to start on.
   */
  replication: { required: number; online: number; ok: boolean; problem?: string };
}

async function configGet(redis: Redis, name: string): Promise<string | undefined> {
  try {
    const reply = (await redis.call('CONFIG', 'GET', name)) as string[];
    return reply[1];
  } catch {
    return undefined; // CONFIG renamed or disabled (managed Redis): fall back to INFO below.
  }
}

/** One field of an `INFO` reply (`field:value` lines), trimmed; undefined when absent. */
export function infoField(info: string, field: string): string | undefined {
  return new RegExp(`^${field}:(.*)$`, 'm').exec(info)?.[1]?.trim();
}

async function hasCommand(redis: Redis, name: string): Promise<boolean> {
  const reply = (await redis.call('COMMAND', 'INFO', name)) as unknown[];
  return Array.isArray(reply) && reply[0] !== null && reply[0] !== undefined;
}

/**
 * Whether this Redis keeps every acknowledged write (AOF with `appendfsync always`, or `WAITAOF` available) and never
 * evicts queue data (`maxmemory-policy noeviction`). Reads `CONFIG GET` and falls back to `INFO` where CONFIG is
 * disabled. On a cluster every master is checked (a slot may move to any of them) and each problem names its node;
 * the mode is the weakest found. Throws only when Redis cannot be reached.
 */
export async function checkRedisDurability(
  client: RedisClient,
  options: { minReplicas?: number } = {},
): Promise<DurabilityReport> {
  const nodes = nodesOf(client);
  if (nodes.length === 0) throw new Error('Redis Cluster: no master known yet (the cluster is not ready)');
  if (nodes.length === 1 && nodes[0] === client) return checkNode(nodes[0], options);
  const reports = await Promise.all(nodes.map((n) => checkNode(n, options)));
  const rank: DurabilityMode[] = ['none', 'waitaof', 'aof-always'];
  const weakest = reports.reduce((a, b) => (rank.indexOf(b.mode) < rank.indexOf(a.mode) ? b : a));
  const fewest = reports.reduce((a, b) => (b.replication.online < a.replication.online ? b : a));
  const short = reports.findIndex((r) => !r.replication.ok);
  return {
    durable: reports.every((r) => r.durable),
    mode: weakest.mode,
    problems: reports.flatMap((r, i) => r.problems.map((p) => `${addressOf(nodes[i]!)}: ${p}`)),
    // WAITAOF per batch only where every master has it: a slot may move to any of them.
    settings: { ...weakest.settings, waitaof: reports.every((r) => r.settings.waitaof) },
    replication: {
      ...fewest.replication,
      ...(short >= 0 ? { problem: `${addressOf(nodes[short]!)}: ${reports[short]!.replication.problem}` } : {}),
    },
  };
}

async function checkNode(redis: Redis, options: { minReplicas?: number }): Promise<DurabilityReport> {
  const [appendonlyConfig, appendfsync, maxmemoryConfig] = await Promise.all([
    configGet(redis, 'appendonly'),
    configGet(redis, 'appendfsync'),
    configGet(redis, 'maxmemory-policy'),
  ]);
  let appendonly = appendonlyConfig;
  let maxmemoryPolicy = maxmemoryConfig;
  if (appendonly === undefined || maxmemoryPolicy === undefined) {
    const info = await redis.info();
    appendonly ??=
      infoField(info, 'aof_enabled') === '1' ? 'yes' : infoField(info, 'aof_enabled') === '0' ? 'no' : undefined;
    maxmemoryPolicy ??= infoField(info, 'maxmemory_policy');
  }
  const waitaof = await hasCommand(redis, 'WAITAOF');
  const settings = {
    appendonly: appendonly ?? 'unknown',
    appendfsync: appendfsync ?? 'unknown',
    maxmemoryPolicy: maxmemoryPolicy ?? 'unknown',
    waitaof,
  };
  const problems = problemsOf(settings);
  const mode: DurabilityMode =
    settings.appendonly !== 'yes'
      ? 'none'
      : settings.appendfsync === 'always'
        ? 'aof-always'
        : waitaof
          ? 'waitaof'
          : 'none';
  const required = options.minReplicas ?? 0;
  let online = 0;
  if (required > 0) {
    // Acknowledged means replicated too (INGEST_MIN_REPLICAS): that many replicas must be connected and online.
    online = (await redis.info('replication')).split('\n').filter((l) => /^slave\d+:.*state=online/.test(l)).length;
  }
  const replication =
    online >= required
      ? { required, online, ok: true }
      : {
          required,
          online,
          ok: false,
          problem:
            `${online} replica(s) online, INGEST_MIN_REPLICAS is ${required}: ` +
            'a callback would not be held by a replica before its success',
        };
  return { durable: problems.length === 0, mode, problems, settings, replication };
}

/** One line per setting that can lose an acknowledged write or evict queue data, each naming the fix. */
function problemsOf(settings: DurabilityReport['settings']): string[] {
  const problems: string[] = [];
  if (settings.appendonly !== 'yes') {
    problems.push(
      `appendonly is "${settings.appendonly}": acknowledged callbacks are lost when Redis restarts; ` +
        'set appendonly yes and appendfsync always',
    );
  } else if (settings.appendfsync !== 'always' && !settings.waitaof) {
    problems.push(
      settings.appendfsync === 'unknown'
        ? 'CONFIG GET is not allowed on this Redis (renamed or disabled, as on some managed services) ' +
            'and it has no WAITAOF: ' +
            'ingest can check neither that the AOF is fsynced before each reply nor, per batch, that it is still on; ' +
            'allow CONFIG GET for ingest (appendfsync always), or use Redis >= 7.2 (WAITAOF)'
        : `appendfsync is "${settings.appendfsync}" and this Redis has no WAITAOF: ` +
            'the last writes before a crash are lost; ' +
            'set appendfsync always (or use Redis >= 7.2)',
    );
  }
  if (settings.maxmemoryPolicy !== 'noeviction') {
    problems.push(
      `maxmemory-policy is "${settings.maxmemoryPolicy}": Redis may evict queued callbacks; ` +
        'set maxmemory-policy noeviction',
    );
  }
  return problems;
}

/**
 * How each enqueue batch proves, before any of it is acknowledged, that Redis keeps it. Checked in the batch
 * itself, not by a poll: a Redis reconfigured (or failed over to a node) that no longer keeps writes refuses the
 * very next batch.
 * - `waitaof`: the server has `WAITAOF` (Redis >= 7.2): each batch waits for `WAITAOF 1 0` after its transaction,
 *   which errors when AOF is off and waits for the fsync whatever `appendfsync` is.
 * - `config-in-transaction`: Redis 7.0/7.1 with `appendfsync always`: each batch's `MULTI`/`EXEC` also runs
 *   {@link DURABILITY_CONFIG_GET}, and the batch counts as stored only when it reads appendonly yes, appendfsync
 *   always and noeviction at the very moment its writes ran ({@link batchDurabilityProblems}).
 * - `none`: INGEST_ALLOW_VOLATILE_REDIS=true; acknowledged callbacks may be lost (never in production).
 */
export type BatchDurabilityCheck = 'waitaof' | 'config-in-transaction' | 'none';

/** The check each batch makes on the Redis `report` describes ({@link BatchDurabilityCheck}). */
export function batchDurabilityCheckOf(report: DurabilityReport, allowVolatile: boolean): BatchDurabilityCheck {
  if (allowVolatile) return 'none';
  return report.settings.waitaof ? 'waitaof' : 'config-in-transaction';
}

/**
 * The command queued in each batch's transaction on a Redis without WAITAOF. `CONFIG GET` is allowed inside
 * `MULTI` (it is not a `no-multi` command) and takes several names since Redis 7.0. Where CONFIG is renamed or
 * disabled, ingest refuses to start on such a Redis (see {@link checkRedisDurability}'s problems): fail closed.
 */
export const DURABILITY_CONFIG_GET: readonly string[] = [
  'CONFIG',
  'GET',
  'appendonly',
  'appendfsync',
  'maxmemory-policy',
];

/**
 * What the batch's own {@link DURABILITY_CONFIG_GET} read says: one line per setting that does not keep the batch,
 * empty when it does. A reply that is not the expected name/value list is a problem too (fail closed).
 */
export function batchDurabilityProblems(reply: unknown): string[] {
  if (!Array.isArray(reply))
    return [`CONFIG GET answered ${typeof reply}, not a list: cannot tell whether Redis keeps the batch`];
  const values = new Map<string, string>();
  for (let i = 0; i + 1 < reply.length; i += 2) values.set(String(reply[i]).toLowerCase(), String(reply[i + 1]));
  return problemsOf({
    appendonly: values.get('appendonly') ?? 'unknown',
    appendfsync: values.get('appendfsync') ?? 'unknown',
    maxmemoryPolicy: values.get('maxmemory-policy') ?? 'unknown',
    waitaof: false,
  });
}

/** What {@link checkRedisMemory} found. */
export interface RedisMemoryReport {
  usedBytes: number;
  /** `maxmemory`; 0 means no limit (then the host's memory is the limit, and headroom is not measured). */
  maxBytes: number;
  /** Free share of `maxmemory` (1 when there is no limit). */
  headroom: number;
}

/**
 * Memory in use against `maxmemory`, from `INFO memory` (works where CONFIG is disabled). On a cluster, the master
 * with the least headroom (a slot may move to any of them).
 */
export async function checkRedisMemory(client: RedisClient): Promise<RedisMemoryReport> {
  const reports = await Promise.all(nodesOf(client).map(memoryOf));
  if (reports.length === 0) throw new Error('Redis Cluster: no master known yet (the cluster is not ready)');
  return reports.reduce((a, b) => (b.headroom < a.headroom ? b : a));
}

async function memoryOf(redis: Redis): Promise<RedisMemoryReport> {
  const info = await redis.info('memory');
  const usedBytes = Number(infoField(info, 'used_memory') ?? 0);
  const maxBytes = Number(infoField(info, 'maxmemory') ?? 0);
  return { usedBytes, maxBytes, headroom: maxBytes > 0 ? Math.max(0, 1 - usedBytes / maxBytes) : 1 };
}
