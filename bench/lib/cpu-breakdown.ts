/**
 * Where a measured run's CPU went, per process, for `pnpm bench --only compare`: the Postgres processes that served
 * the bench's database (by pid, from pg_stat_activity, CPU from /proc with proc.ts's cpuSecondsOf), Redis's
 * per-command time (`INFO commandstats` deltas: BullMQ's scripts and the commands they run) and its AOF work
 * (`INFO persistence`, /proc/<pid>/io), and Postgres's own counters (transactions, rows written per table).
 */
import { readFileSync } from 'node:fs';
import type { Redis } from 'ioredis';
import type pg from 'pg';
import { cpuSecondsOf } from './proc.ts';

/** A query on the bench's own connection (counted by the caller: its commits are left out of the system's). */
export type Query = <R extends pg.QueryResultRow>(sql: string, params?: unknown[]) => Promise<pg.QueryResult<R>>;

/** application_name of the bench's own connections: excluded from the Postgres CPU it reports. */
export const BENCH_MONITOR_APP = 'mcb-bench-monitor';

export interface PostgresCpu {
  /** Backends connected to the bench's database (autovacuum workers on it included), the bench's own excluded. */
  backendsSeconds: number;
  /** Background processes every database shares (WAL writer, checkpointer, background writer, launchers). */
  sharedSeconds: number;
  /** Backends seen in the window. */
  backends: number;
}

/**
 * Samples the CPU of the Postgres processes that serve `database` every `intervalMs` (a backend that exits keeps its
 * last sampled figure; one that starts in the window counts from zero), until `stop()`.
 */
export function trackPostgresCpu(
  query: Query,
  database: string,
  intervalMs = 250,
): { stop: () => Promise<PostgresCpu> } {
  const first = new Map<number, number>();
  const last = new Map<number, { cpu: number; shared: boolean }>();
  let started = false;
  const take = async () => {
    const rows = await query<{ pid: number; shared: boolean }>(
      `select pid, datname is null as shared from pg_stat_activity
        where (datname = $1 and coalesce(application_name, '') <> $2) or (datname is null and backend_type <> 'client backend')`,
      [database, BENCH_MONITOR_APP],
    );
    for (const r of rows.rows) {
      const cpu = cpuSecondsOf(r.pid);
      if (!first.has(r.pid)) first.set(r.pid, started ? 0 : cpu);
      last.set(r.pid, { cpu, shared: r.shared });
    }
    started = true;
  };
  let running = true;
  const loop = (async () => {
    await take();
    while (running) {
      await new Promise((r) => setTimeout(r, intervalMs));
      await take().catch(() => {});
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      await take();
      const out: PostgresCpu = { backendsSeconds: 0, sharedSeconds: 0, backends: 0 };
      for (const [pid, l] of last) {
        const d = l.cpu - (first.get(pid) ?? 0);
        if (l.shared) out.sharedSeconds += d;
        else {
          out.backendsSeconds += d;
          out.backends++;
        }
      }
      return out;
    },
  };
}

/** Postgres counters of the bench's database: commits and rows written, by table. */
export interface PostgresCounters {
  commits: number;
  /** Rows inserted / updated / deleted by table (pg_stat_user_tables). */
  tables: Record<string, { ins: number; upd: number; del: number }>;
}

export async function postgresCounters(query: Query): Promise<PostgresCounters> {
  const c = await query<{ n: string }>(
    'select xact_commit as n from pg_stat_database where datname = current_database()',
  );
  const t = await query<{ relname: string; ins: string; upd: string; del: string }>(
    'select relname, n_tup_ins as ins, n_tup_upd as upd, n_tup_del as del from pg_stat_user_tables',
  );
  return {
    commits: Number(c.rows[0]?.n ?? 0),
    tables: Object.fromEntries(
      t.rows.map((r) => [r.relname, { ins: Number(r.ins), upd: Number(r.upd), del: Number(r.del) }]),
    ),
  };
}

/** Per-credit difference of two counter snapshots; tables with no writes left out. */
export function postgresCountersPerCredit(
  a: PostgresCounters,
  b: PostgresCounters,
  credits: number,
  ownCommits: number,
) {
  const tables: Record<string, { ins: number; upd: number; del: number }> = {};
  for (const [name, x] of Object.entries(b.tables)) {
    const y = a.tables[name] ?? { ins: 0, upd: 0, del: 0 };
    const d = { ins: (x.ins - y.ins) / credits, upd: (x.upd - y.upd) / credits, del: (x.del - y.del) / credits };
    if (d.ins || d.upd || d.del) tables[name] = d;
  }
  return { transactions: (b.commits - a.commits - ownCommits) / credits, tables };
}

/** Redis's counters: per-command calls and time, AOF bytes, socket writes, and write syscalls of the process. */
export interface RedisCounters {
  commands: Record<string, { calls: number; usec: number }>;
  aofBytes: number;
  /** Replies written to clients (INFO stats total_writes_processed). */
  clientWrites: number;
  /** write/writev syscalls of the whole process (/proc/<pid>/io syscw): client replies plus AOF writes. */
  writeSyscalls: number;
}

export async function redisCounters(admin: Redis, pid: number): Promise<RedisCounters> {
  const info = await admin.info('all');
  const commands: RedisCounters['commands'] = {};
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm))
    commands[m[1]!] = { calls: Number(m[2]), usec: Number(m[3]) };
  const field = (name: string) => Number(new RegExp(`^${name}:(\\d+)`, 'm').exec(info)?.[1] ?? 0);
  let writeSyscalls = 0;
  try {
    writeSyscalls = Number(/^syscw: (\d+)/m.exec(readFileSync(`/proc/${pid}/io`, 'utf8'))?.[1] ?? 0);
  } catch {
    // not readable here: the AOF write count is reported as unknown
  }
  return {
    commands,
    aofBytes: field('aof_current_size'),
    clientWrites: field('total_writes_processed'),
    writeSyscalls,
  };
}

/** Redis's work per credit between two snapshots (the bench's own INFO calls left out). */
export interface RedisPerCredit {
  /** Every command's calls and microseconds per credit, most time first (scripts include the commands they run). */
  commands: { name: string; calls: number; usec: number }[];
  /** EVALSHA/EVAL (BullMQ's Lua scripts): calls and microseconds per credit. */
  scripts: { calls: number; usec: number };
  /** XADD calls per credit: BullMQ's event stream entries. */
  streamEntries: number;
  aofBytes: number;
  /**
   * AOF writes per credit, each followed by an fsync with `appendfsync always`: write syscalls minus replies
   * written to clients (null when /proc/<pid>/io is not readable).
   */
  aofWrites: number | null;
}

export function redisPerCredit(a: RedisCounters, b: RedisCounters, credits: number): RedisPerCredit {
  const commands = Object.entries(b.commands)
    .filter(([name]) => name !== 'info')
    .map(([name, x]) => ({
      name,
      calls: (x.calls - (a.commands[name]?.calls ?? 0)) / credits,
      usec: (x.usec - (a.commands[name]?.usec ?? 0)) / credits,
    }))
    .filter((c) => c.calls > 0)
    .sort((x, y) => y.usec - x.usec);
  const sum = (names: string[]) =>
    commands
      .filter((c) => names.includes(c.name))
      .reduce((s, c) => ({ calls: s.calls + c.calls, usec: s.usec + c.usec }), { calls: 0, usec: 0 });
  const aofWrites =
    a.writeSyscalls && b.writeSyscalls
      ? (b.writeSyscalls - a.writeSyscalls - (b.clientWrites - a.clientWrites)) / credits
      : null;
  return {
    commands,
    scripts: sum(['evalsha', 'eval', 'evalsha_ro', 'eval_ro', 'fcall']),
    streamEntries: sum(['xadd']).calls,
    aofBytes: (b.aofBytes - a.aofBytes) / credits,
    aofWrites,
  };
}
