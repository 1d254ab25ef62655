/**
 * A primary and a streaming standby of our own (initdb, then pg_basebackup -R with a replication slot) on free
 * ports, for tests that stop the standby or switch over to it. Synchronous, as a receiver of money needs: the
 * primary names the standby in synchronous_standby_names and every COMMIT waits for the standby's flush. The
 * standby does not carry that setting, so once promoted it commits alone (as Patroni leaves a new primary whose
 * old one is down). Never the shared server.
 */
import { spawnSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { freePort, onProcessExit, waitFor } from '@mcb/testkit';
import pg from 'pg';
import { asPostgres, makePgDir, PG_BIN, pgExec, pgUser } from './own-postgres.ts';

/** The standby's name, as the primary's synchronous_standby_names and pg_stat_replication know it. */
const STANDBY_NAME = 'mcb_standby';

/** One server of the pair. */
export interface PgNode {
  port: number;
  /** URL of database `name` on this server. */
  url(name: string): string;
  /** `pg_ctl stop -m fast`. */
  stop(): Promise<void>;
  /** `pg_ctl start`, with the options it was first started with. */
  start(): Promise<void>;
  /** Run `sql` on database `database` through a client of its own. */
  query<T extends object = Record<string, unknown>>(sql: string, database?: string): Promise<T[]>;
}

export interface ReplicatedPostgres {
  primary: PgNode;
  standby: PgNode;
  /** Resolves once the primary reports the standby streaming as its synchronous standby. */
  waitForSyncStandby(timeoutMs?: number): Promise<void>;
  /** Resolves once the standby has replayed all WAL the primary has written so far. */
  waitForCatchUp(timeoutMs?: number): Promise<void>;
  /** `pg_ctl promote -w` on the standby: it becomes a primary (on a new timeline) and accepts writes. */
  promote(): Promise<void>;
  /** Stop both (immediate) and remove their folders. */
  destroy(): Promise<void>;
}

function node(dir: string, data: string, port: number, settings: string[]): PgNode {
  const options = [`-p ${port}`, `-k ${dir}`, '-c listen_addresses=127.0.0.1', ...settings.map((s) => `-c ${s}`)].join(
    ' ',
  );
  const ctl = (...args: string[]) => pgExec('pg_ctl', ['-D', data, '-l', `${data}.log`, '-w', '-t', '60', ...args]);
  const url = (name: string) => `postgres://${pgUser()}@127.0.0.1:${port}/${name}`;
  return {
    port,
    url,
    stop: () => ctl('-m', 'fast', 'stop'),
    start: () => ctl('-o', options, 'start'),
    async query<T extends object>(sql: string, database = 'postgres') {
      const client = new pg.Client({ connectionString: url(database) });
      client.on('error', () => {});
      await client.connect();
      try {
        return (await client.query<T>(sql)).rows;
      } finally {
        await client.end().catch(() => undefined);
      }
    },
  };
}

export async function startOwnReplicatedPostgres(
  options: { maxConnections?: number } = {},
): Promise<ReplicatedPostgres> {
  const dir = makePgDir('mcb-rel-pg-pair-');
  const primaryData = join(dir, 'primary');
  const standbyData = join(dir, 'standby');
  // fsync off keeps the test quick and changes nothing here: the COMMIT waits for the standby's acknowledgement
  // (synchronous_commit on) whether or not either server syncs its disk.
  const common = [
    'fsync=off',
    'full_page_writes=off',
    'synchronous_commit=on',
    `max_connections=${options.maxConnections ?? 200}`,
  ];
  const primary = node(dir, primaryData, await freePort(), [...common, `synchronous_standby_names=${STANDBY_NAME}`]);
  const standby = node(dir, standbyData, await freePort(), [...common, `cluster_name=${STANDBY_NAME}`]);
  const stopAll = () => {
    for (const data of [standbyData, primaryData]) {
      const [file, argv] = asPostgres(join(PG_BIN, 'pg_ctl'), [
        '-D',
        data,
        'stop',
        '-m',
        'immediate',
        '-w',
        '-t',
        '10',
      ]);
      spawnSync(file, argv, { stdio: 'ignore' });
    }
    rmSync(dir, { recursive: true, force: true });
  };
  const unregister = onProcessExit(stopAll);
  try {
    await pgExec('initdb', [
      '-D',
      primaryData,
      '-A',
      'trust',
      '-U',
      pgUser(),
      '-E',
      'UTF8',
      '--no-sync',
      '--no-instructions',
    ]);
    await primary.start();
    // -R writes primary_conninfo and the slot name into the copy; the slot keeps the WAL a stopped standby needs.
    await pgExec('pg_basebackup', [
      '-h',
      '127.0.0.1',
      '-p',
      String(primary.port),
      '-U',
      pgUser(),
      '-D',
      standbyData,
      '-R',
      '-X',
      'stream',
      '-C',
      '-S',
      STANDBY_NAME,
      '--no-sync',
    ]);
    await standby.start();
  } catch (e) {
    unregister();
    stopAll();
    throw e;
  }
  const pair: ReplicatedPostgres = {
    primary,
    standby,
    async waitForSyncStandby(timeoutMs = 30_000) {
      await waitFor(
        async () =>
          (
            await primary.query<{ sync_state: string }>(
              `SELECT sync_state FROM pg_stat_replication WHERE application_name = '${STANDBY_NAME}'`,
            )
          ).some((r) => r.sync_state === 'sync'),
        { timeoutMs, intervalMs: 100, message: 'the standby did not become the synchronous standby' },
      );
    },
    async waitForCatchUp(timeoutMs = 30_000) {
      const [{ lsn }] = (await primary.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn')) as [
        { lsn: string },
      ];
      await waitFor(
        async () =>
          (await standby.query<{ ok: boolean }>(`SELECT pg_last_wal_replay_lsn() >= '${lsn}'::pg_lsn AS ok`))[0]?.ok ===
          true,
        { timeoutMs, intervalMs: 50, message: `the standby did not replay up to ${lsn}` },
      );
    },
    promote: () => pgExec('pg_ctl', ['-D', standbyData, '-w', '-t', '60', 'promote']),
    async destroy() {
      unregister();
      stopAll();
    },
  };
  await pair.waitForSyncStandby();
  return pair;
}
