import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '@mcb/core/config';
import { createRedis, describeRedisTarget, redisTargetOf } from '@mcb/core/redis';
import { freePort, startOwnRedis, startOwnSentinel, waitFor, type OwnRedis } from '@mcb/testkit';

// Redis behind TLS and sentinels behind a password, as docs/deployment.md describes them: a rediss:// REDIS_URL
// signed by a private CA (REDIS_TLS_CA_FILE), and REDIS_SENTINEL_PASSWORD for sentinels that ask for one. Real
// servers: redis-server with its TLS port, and a sentinel with `requirepass`.
const dir = mkdtempSync(join(tmpdir(), 'mcb-redis-tls-'));
const ca = join(dir, 'ca.pem');
let tlsRedis: OwnRedis;
let tlsPort: number;

function openssl(...args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
}

beforeAll(async () => {
  // A private CA and a server certificate for 127.0.0.1 signed by it.
  openssl(
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-days',
    '1',
    '-subj',
    '/CN=mcb test CA',
    '-keyout',
    'ca.key',
    '-out',
    'ca.pem',
  );
  openssl(
    'req',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-subj',
    '/CN=127.0.0.1',
    '-keyout',
    'server.key',
    '-out',
    'server.csr',
  );
  writeFileSync(join(dir, 'san.ext'), 'subjectAltName=IP:127.0.0.1\n');
  openssl(
    'x509',
    '-req',
    '-in',
    'server.csr',
    '-CA',
    'ca.pem',
    '-CAkey',
    'ca.key',
    '-CAcreateserial',
    '-days',
    '1',
    '-extfile',
    'san.ext',
    '-out',
    'server.pem',
  );
  tlsPort = await freePort();
  tlsRedis = await startOwnRedis([
    '--tls-port',
    String(tlsPort),
    '--tls-cert-file',
    join(dir, 'server.pem'),
    '--tls-key-file',
    join(dir, 'server.key'),
    '--tls-ca-cert-file',
    ca,
    '--tls-auth-clients',
    'no',
  ]);
}, 30_000);

afterAll(async () => {
  await tlsRedis?.destroy();
  rmSync(dir, { recursive: true, force: true });
});

describe('TLS to Redis', () => {
  it('rediss:// with REDIS_TLS_CA_FILE verifies the server against the private CA and talks to it', async () => {
    const config = loadConfig({ REDIS_URL: `rediss://127.0.0.1:${tlsPort}`, REDIS_TLS_CA_FILE: ca }, 'cli');
    const target = redisTargetOf(config);
    expect(target).toMatchObject({ kind: 'single', tls: { ca: expect.stringContaining('BEGIN CERTIFICATE') } });
    const client = createRedis(target, 'worker', { connectionName: 'tls-test' });
    try {
      expect(await client.ping()).toBe('PONG');
    } finally {
      client.disconnect();
    }
  });

  it("without the CA the server's certificate is refused (no silent fallback to an unverified connection)", async () => {
    const client = createRedis(
      redisTargetOf(loadConfig({ REDIS_URL: `rediss://127.0.0.1:${tlsPort}` }, 'cli')),
      'producer',
    );
    const errors: string[] = [];
    client.on('error', (e: Error) => errors.push(e.message));
    try {
      await expect(client.ping()).rejects.toThrow();
      await waitFor(() => errors.length > 0, { timeoutMs: 10_000, message: 'no connection error' });
      expect(errors.join('\n')).toMatch(/self[- ]signed|unable to verify|certificate/i);
    } finally {
      client.disconnect();
    }
  });

  it('names a CA file it cannot read, and refuses TLS settings that would be half-applied', () => {
    expect(() =>
      redisTargetOf(
        loadConfig({ REDIS_URL: `rediss://127.0.0.1:${tlsPort}`, REDIS_TLS_CA_FILE: join(dir, 'missing.pem') }, 'cli'),
      ),
    ).toThrow(/REDIS_TLS_CA_FILE: .*missing\.pem cannot be read \(ENOENT\)/);
    expect(() => loadConfig({ REDIS_TLS: 'true' }, 'cli')).toThrow(
      /REDIS_TLS: only with REDIS_SENTINELS or REDIS_CLUSTER_NODES; for a single node write a rediss:\/\/ REDIS_URL/,
    );
    expect(() => loadConfig({ REDIS_TLS_CA_FILE: ca }, 'cli')).toThrow(/REDIS_TLS_CA_FILE: only with TLS to Redis/);
    expect(() => loadConfig({ REDIS_SENTINEL_PASSWORD: 'x' }, 'cli')).toThrow(
      /REDIS_SENTINEL_PASSWORD: only with REDIS_SENTINELS/,
    );
  });

  it('REDIS_TLS turns TLS on towards the sentinels and the data nodes, and towards every cluster node', () => {
    const sentinel = redisTargetOf(
      loadConfig(
        {
          REDIS_URL: '',
          REDIS_SENTINELS: 'a:26379',
          REDIS_SENTINEL_NAME: 'mcb',
          REDIS_TLS: 'true',
          REDIS_TLS_CA_FILE: ca,
        },
        'cli',
      ),
    );
    expect(sentinel).toMatchObject({ kind: 'sentinel', tls: { ca: expect.stringContaining('BEGIN CERTIFICATE') } });
    expect(describeRedisTarget(sentinel)).toBe('TLS sentinel master "mcb" via a:26379');
    const client = createRedis(sentinel, 'producer');
    client.on('error', () => {});
    try {
      expect(client.options).toMatchObject({
        tls: { ca: expect.any(String) },
        sentinelTLS: { ca: expect.any(String) },
        enableTLSForSentinelMode: true,
      });
    } finally {
      client.disconnect();
    }
    const cluster = redisTargetOf(
      loadConfig({ REDIS_URL: '', REDIS_CLUSTER_NODES: 'a:6379', QUEUE_PREFIX: '{mcb}', REDIS_TLS: 'true' }, 'cli'),
    );
    expect(cluster).toEqual({ kind: 'cluster', nodes: [{ host: 'a', port: 6379 }], tls: {} });
  });
});

describe('sentinels that ask for a password', () => {
  it(
    'REDIS_SENTINEL_PASSWORD reaches the primary through them; without it nothing is reached',
    { timeout: 60_000 },
    async () => {
      const setup = await startOwnSentinel('mcb', { password: 'sentinel-secret' });
      const base = { REDIS_URL: '', REDIS_SENTINELS: setup.sentinels, REDIS_SENTINEL_NAME: 'mcb' };
      try {
        const target = redisTargetOf(loadConfig({ ...base, REDIS_SENTINEL_PASSWORD: 'sentinel-secret' }, 'cli'));
        expect(target).toMatchObject({ kind: 'sentinel', sentinelPassword: 'sentinel-secret' });
        const client = createRedis(target, 'worker', { connectionName: 'sentinel-auth-test' });
        try {
          await client.set('mcb-sentinel-auth', 'ok');
          expect(await client.get('mcb-sentinel-auth')).toBe('ok');
          const primary = createRedis(setup.primary.url, 'worker');
          try {
            expect(await primary.get('mcb-sentinel-auth')).toBe('ok');
          } finally {
            primary.disconnect();
          }
        } finally {
          client.disconnect();
        }
        const refused = createRedis(redisTargetOf(loadConfig(base, 'cli')), 'producer');
        refused.on('error', () => {});
        try {
          await expect(refused.ping()).rejects.toThrow();
        } finally {
          refused.disconnect();
        }
      } finally {
        await setup.destroy();
      }
    },
  );
});
