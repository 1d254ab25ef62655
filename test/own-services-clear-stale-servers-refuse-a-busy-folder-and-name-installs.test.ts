import { execFile, spawn, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { promisify } from 'node:util';
import {
  chownToServerUser,
  commandAs,
  commandOf,
  findPostgresBinaries,
  freePort,
  redisServerPath,
  startOwnCluster,
  startOwnRedis,
  startOwnSentinel,
  waitFor,
} from '@mcb/testkit';
import pg from 'pg';
import { startOwnServices } from '@mcb/testkit/own-services';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';

// The own services' folder hygiene where the kernel's parent-death signal cannot help (no setpriv, or a server
// started by hand): a server a dead run left behind is stopped before a new one starts; a folder a live run uses is
// refused; and a machine without redis-server gets one message with the install commands and the Docker way.
const ROOT = resolve(import.meta.dirname, '..');
const base = mkdtempSync(join(tmpdir(), 'mcb-own-hygiene-'));
chmodSync(base, 0o755);
afterAll(() => rmSync(base, { recursive: true, force: true }));

const deadPid = (): number => spawnSync(process.execPath, ['-e', '0']).pid!;

describe('own services', () => {
  it('stop a stale redis-server that a run which died left in the folder (its pid file), then start their own', async () => {
    const folder = join(base, 'stale');
    mkdirSync(join(folder, 'redis'), { recursive: true });
    const port = await freePort();
    // A survivor: started without any tie to us, detached, its pid in the folder's pid file; its owner is dead.
    const survivor = spawn(
      redisServerPath()!,
      [
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--dir',
        join(folder, 'redis'),
        '--save',
        '',
        '--pidfile',
        join(folder, 'redis', 'redis.pid'),
      ],
      { stdio: 'ignore', detached: true },
    );
    survivor.unref();
    await waitFor(() => existsSync(join(folder, 'redis', 'redis.pid')), { timeoutMs: 10_000 });
    writeFileSync(join(folder, 'owner.pid'), `${deadPid()}\n`);

    const own = await startOwnServices({
      plan: { postgres: false, redis: true, reason: 'test' },
      folder,
      command: 'test',
      durable: false,
    }).catch((e: Error) => {
      survivor.kill('SIGKILL'); // never leave it behind, even when this test fails
      throw e;
    });
    try {
      expect(own.line).toContain(`stopped a stale redis-server (pid ${survivor.pid}) of an earlier run`);
      expect(commandOf(survivor.pid!)).toBeUndefined();
      expect(own.databaseUrl).toBeUndefined();
      const redis = new Redis(own.redisUrl!, { maxRetriesPerRequest: 1 });
      try {
        expect(await redis.config('GET', 'appendfsync')).toEqual(['appendfsync', 'always']);
        expect(await redis.config('GET', 'maxmemory-policy')).toEqual(['maxmemory-policy', 'noeviction']);
      } finally {
        redis.disconnect();
      }
    } finally {
      await own.stop();
    }
    expect(existsSync(join(folder, 'owner.pid'))).toBe(false);
    expect(existsSync(join(folder, 'redis', 'redis.pid'))).toBe(false);
  });

  it(
    'stop a stale postgres that a run which died left running from the folder (its postmaster.pid), then start their own on the same cluster',
    { timeout: 90_000 },
    async () => {
      const folder = join(base, 'stale-pg');
      const pgFolder = join(folder, 'postgres');
      const data = join(pgFolder, 'data');
      mkdirSync(pgFolder, { recursive: true });
      chownToServerUser(pgFolder);
      const binaries = findPostgresBinaries()!;
      const [initdb, initArgs] = commandAs(join(binaries.dir, 'initdb'), [
        '-D',
        data,
        '-A',
        'trust',
        '-U',
        'postgres',
        '--no-sync',
        '--no-instructions',
      ]);
      await promisify(execFile)(initdb, initArgs, { cwd: pgFolder, timeout: 60_000 });
      const port = await freePort();
      // A survivor: no parent-death tie, detached, as a run on a system without setpriv would leave it.
      const [file, argv] = commandAs(join(binaries.dir, 'postgres'), [
        '-D',
        data,
        '-c',
        `port=${port}`,
        '-c',
        'listen_addresses=127.0.0.1',
        '-c',
        'unix_socket_directories=',
      ]);
      const survivor = spawn(file, argv, { cwd: pgFolder, stdio: 'ignore', detached: true });
      survivor.unref();
      await waitFor(() => existsSync(join(data, 'postmaster.pid')), { timeoutMs: 30_000 });
      writeFileSync(join(folder, 'owner.pid'), `${deadPid()}\n`);

      const own = await startOwnServices({
        plan: { postgres: true, redis: false, reason: 'test' },
        folder,
        command: 'test',
        durable: false,
      }).catch((e: Error) => {
        survivor.kill('SIGQUIT'); // never leave it behind, even when this test fails
        throw e;
      });
      try {
        expect(own.line).toContain(`stopped a stale postgres (pid ${survivor.pid}) of an earlier run`);
        expect(commandOf(survivor.pid!)).toBeUndefined();
        expect(own.redisUrl).toBeUndefined();
        const client = new pg.Client({ connectionString: own.databaseUrl });
        await client.connect();
        try {
          expect(
            (await client.query<{ dir: string }>(`select current_setting('data_directory') as dir`)).rows[0]!.dir,
          ).toBe(data);
        } finally {
          await client.end();
        }
      } finally {
        await own.stop();
      }
      expect(existsSync(join(data, 'postmaster.pid'))).toBe(false);
    },
  );

  it('refuse a folder whose owner still runs, naming it, and start nothing', async () => {
    const folder = join(base, 'busy');
    mkdirSync(folder, { recursive: true });
    const owner = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60_000)'], { stdio: 'ignore' });
    try {
      writeFileSync(join(folder, 'owner.pid'), `${owner.pid}\n`);
      await expect(
        startOwnServices({
          plan: { postgres: true, redis: true, reason: 'test' },
          folder,
          command: 'demo',
          durable: true,
        }),
      ).rejects.toThrow(`another \`pnpm demo\` (pid ${owner.pid}) runs its own Postgres and Redis from ${folder}`);
      expect(existsSync(join(folder, 'redis'))).toBe(false);
      expect(existsSync(join(folder, 'postgres'))).toBe(false);
    } finally {
      owner.kill('SIGKILL');
    }
  });

  const demo = (env: Record<string, string>) =>
    promisify(execFile)(process.execPath, ['scripts/demo.ts', '--once', '--free-ports'], {
      cwd: ROOT,
      env: { MCB_ENV_FILE: 'none', KEYS_DIR: join(base, 'keys'), MCB_OWN_SERVICES_DIR: base, ...env },
      timeout: 30_000,
    }).then(
      (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
      (e: { code?: number; stdout?: string; stderr?: string }) => ({
        code: e.code ?? -1,
        stdout: e.stdout ?? '',
        stderr: e.stderr ?? '',
      }),
    );

  it('without redis-server on the machine: the demo exits 1 with one message naming the install commands and Docker', async () => {
    // PATH with node alone: no redis-server anywhere.
    const r = await demo({ PATH: dirname(process.execPath), MCB_OWN_SERVICES: '1' });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('demo: MCB_OWN_SERVICES=1, and this machine has no redis-server to start its own.');
    expect(r.stderr).toContain('Debian/Ubuntu: sudo apt-get install redis-server postgresql');
    expect(r.stderr).toContain('macOS:         brew install redis postgresql');
    expect(r.stderr).toContain('docker compose up -d postgres redis');
    expect(existsSync(join(base, 'demo', 'owner.pid'))).toBe(false);
  });

  it("a test's own Redis, Sentinel and Cluster nodes: redis-server from PATH, or one error naming the install", async () => {
    const path = process.env.PATH;
    process.env.PATH = dirname(process.execPath); // node alone: no redis-server anywhere
    const missing =
      'redis-server is not on PATH: install Redis (Debian: apt-get install redis-server; macOS: brew install redis)';
    try {
      await expect(startOwnRedis()).rejects.toThrow(missing);
      await expect(startOwnSentinel('mcb')).rejects.toThrow(missing);
      await expect(startOwnCluster(3)).rejects.toThrow(missing);
    } finally {
      process.env.PATH = path;
    }
    // The first redis-server on PATH is the one started, for every kind of node (not Debian's /usr/bin by name).
    const real = redisServerPath()!;
    const wrapperDir = mkdtempSync(join(base, 'bin-'));
    const calls = join(wrapperDir, 'calls');
    writeFileSync(join(wrapperDir, 'redis-server'), `#!/bin/sh\necho "$*" >> '${calls}'\nexec '${real}' "$@"\n`);
    chmodSync(join(wrapperDir, 'redis-server'), 0o755);
    process.env.PATH = `${wrapperDir}:${path}`;
    try {
      const sentinel = await startOwnSentinel('mcb');
      await sentinel.destroy();
      const cluster = await startOwnCluster(3);
      await cluster.destroy();
    } finally {
      process.env.PATH = path;
    }
    const lines = readFileSync(calls, 'utf8').trim().split('\n');
    expect(lines.filter((l) => l.includes('--sentinel'))).toHaveLength(1);
    expect(lines.filter((l) => l.includes('--replicaof'))).toHaveLength(1);
    expect(lines.filter((l) => l.includes('--cluster-enabled yes'))).toHaveLength(3);
  });

  it('refuse a switch value they do not know', async () => {
    const r = await demo({ PATH: process.env.PATH ?? '', MCB_OWN_SERVICES: 'sometimes' });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(
      'MCB_OWN_SERVICES: expected 1 (always start own Postgres and Redis), 0 (never) or auto (got "sometimes")',
    );
  });
});
