import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { generateKeyPair, loadKeyRing } from '@mcb/core/callback';
import { AppError, ErrorCodes } from '@mcb/core/errors';
import { startRespProxy, uniquePrefix } from '@mcb/testkit';
import { checkRedisDurability } from '../src/app.ts';
import {
  captureLogger,
  DURABLE_REDIS_ARGS,
  MERCHANT_NO,
  startIngest,
  startOwnRedis,
  type OwnRedis,
} from '@mcb/testkit/ingest';

const keys = generateKeyPair();
const keyRing = loadKeyRing([keys.privateKeyPem]);
const dir = mkdtempSync(join(tmpdir(), 'mcb-ingest-'));
const keyFile = join(dir, 'merchant.pem');
writeFileSync(keyFile, keys.privateKeyPem);
const servers: OwnRedis[] = [];
let volatile: OwnRedis;

beforeAll(async () => {
  volatile = await startOwnRedis(['--appendonly', 'no']);
  servers.push(volatile);
});
afterAll(async () => {
  await Promise.all(servers.map((s) => s.destroy()));
  rmSync(dir, { recursive: true, force: true });
});

/** The durability report of a Redis started with `args`; `hideWaitaof` makes it look older than 7.2 whatever it is. */
async function durabilityOf(args: string[], options: { hideWaitaof?: boolean } = {}) {
  const server = await startOwnRedis(args);
  servers.push(server);
  const proxy = options.hideWaitaof
    ? await startRespProxy(server.url, (cmd) =>
        cmd[0] === 'COMMAND' && cmd[2]?.toUpperCase() === 'WAITAOF' ? { reply: [null] } : { forward: true },
      )
    : undefined;
  const client = new Redis(proxy?.url ?? server.url, { maxRetriesPerRequest: 1 });
  try {
    return await checkRedisDurability(client);
  } finally {
    client.disconnect();
    await proxy?.close();
  }
}

/** The ingest process started on the volatile Redis (it must refuse), with its exit code and both outputs. */
async function runIngestOnVolatileRedis(
  logLevel: string,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, ['apps/ingest/src/main.ts'], {
    env: {
      PATH: process.env.PATH,
      MERCHANT_NO,
      MERCHANT_PRIVATE_KEY_FILE: keyFile,
      REDIS_URL: volatile.url,
      QUEUE_PREFIX: uniquePrefix('vol'),
      INGEST_PORT: '0',
      INGEST_METRICS_PORT: '0',
      LOG_LEVEL: logLevel,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const out = { stdout: '', stderr: '' };
  child.stdout.on('data', (c) => (out.stdout += String(c)));
  child.stderr.on('data', (c) => (out.stderr += String(c)));
  // 'close', not 'exit': the process's last lines may still be in the pipe when it exits.
  const code = await new Promise<number | null>((resolve) => child.once('close', (c) => resolve(c)));
  return { code, ...out };
}

describe('ingest refuses a Redis that may lose acknowledged callbacks', () => {
  it('checkRedisDurability: AOF with fsync always and noeviction is durable', async () => {
    expect(await durabilityOf(DURABLE_REDIS_ARGS)).toMatchObject({ durable: true, mode: 'aof-always', problems: [] });
  });

  it('checkRedisDurability names appendfsync when AOF fsyncs every second on a Redis without WAITAOF', async () => {
    const r = await durabilityOf(['--appendonly', 'yes', '--appendfsync', 'everysec'], { hideWaitaof: true });
    expect(r.durable).toBe(false);
    expect(r.settings.waitaof).toBe(false);
    expect(r.problems.join('\n')).toMatch(/appendfsync is "everysec"/);
  });

  it('checkRedisDurability names maxmemory-policy when Redis may evict', async () => {
    const r = await durabilityOf([...DURABLE_REDIS_ARGS.slice(0, 4), '--maxmemory-policy', 'allkeys-lru']);
    expect(r.durable).toBe(false);
    expect(r.problems).toEqual([expect.stringMatching(/maxmemory-policy is "allkeys-lru".*noeviction/)]);
  });

  it('buildApp throws REDIS_NOT_DURABLE naming appendonly when persistence is off', async () => {
    const err = await startIngest({ redisUrl: volatile.url, prefix: uniquePrefix('vol'), keyRing }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(AppError);
    expect((err as AppError).code).toBe(ErrorCodes.REDIS_NOT_DURABLE);
    expect((err as AppError).message).toMatch(/appendonly is "no"/);
    expect((err as AppError).message).toContain('INGEST_ALLOW_VOLATILE_REDIS');
  });

  it('with INGEST_ALLOW_VOLATILE_REDIS=true it starts and warns', async () => {
    const { logger, lines } = captureLogger();
    const ingest = await startIngest({
      redisUrl: volatile.url,
      prefix: uniquePrefix('vol'),
      keyRing,
      logger,
      env: { INGEST_ALLOW_VOLATILE_REDIS: 'true' },
    });
    try {
      expect(lines.some((l) => l.includes('"level":40') && l.includes('INGEST_ALLOW_VOLATILE_REDIS=true'))).toBe(true);
      expect((await ingest.app.inject({ method: 'GET', url: '/readyz' })).json()).toMatchObject({
        checks: { durability: 'volatile (allowed)' },
      });
    } finally {
      await ingest.close();
    }
  });

  it('the ingest process exits non-zero with a message naming the setting', async () => {
    const { code, stderr } = await runIngestOnVolatileRedis('silent');
    expect(code).toBe(1);
    expect(stderr).toMatch(/appendonly is "no"/);
  });

  it('with logs on and output piped, the refusal is JSON only: one fatal line naming the setting, no raw line', async () => {
    const { code, stdout, stderr } = await runIngestOnVolatileRedis('info');
    expect(code).toBe(1);
    const lines = `${stdout}\n${stderr}`.split('\n').filter((l) => l.trim() !== '');
    const parsed = lines.map((l) => {
      try {
        return JSON.parse(l) as Record<string, unknown>;
      } catch {
        return l;
      }
    });
    expect(parsed.filter((l) => typeof l === 'string')).toEqual([]);
    const fatal = parsed.filter(
      (l): l is Record<string, unknown> => typeof l === 'object' && l.msg === 'ingest refused to start',
    );
    expect(fatal).toHaveLength(1);
    expect(JSON.stringify(fatal[0])).toMatch(/appendonly is \\"no\\"/);
  });
});
