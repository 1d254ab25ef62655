import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '@mcb/core/config';
import { redisTargetOf } from '@mcb/core/redis';

// No Docker engine runs on our machines, so the compose file is checked as data.
const compose = parse(readFileSync(new URL('../docker-compose.yml', import.meta.url), 'utf8'), { merge: true }) as {
  services: Record<
    string,
    {
      command?: string[];
      healthcheck?: { test: unknown };
      build?: unknown;
      image?: string;
      profiles?: string[];
      environment?: Record<string, string>;
      depends_on?: Record<string, { condition: string; required?: boolean }>;
    }
  >;
};

function flag(command: string[] | undefined, name: string): string | undefined {
  const i = command?.indexOf(name) ?? -1;
  return i >= 0 ? command?.[i + 1] : undefined;
}

describe('docker-compose.yml', () => {
  it('runs Redis durable: AOF, fsync always, no eviction, with a health check', () => {
    const redis = compose.services.redis;
    expect(redis?.healthcheck?.test).toBeDefined();
    expect(flag(redis?.command, '--appendonly')).toBe('yes');
    expect(flag(redis?.command, '--appendfsync')).toBe('always');
    expect(flag(redis?.command, '--maxmemory-policy')).toBe('noeviction');
  });

  it('runs Postgres with a health check', () => {
    expect(compose.services.postgres?.healthcheck?.test).toBeDefined();
  });

  it('builds every app from the one Dockerfile', () => {
    for (const app of ['ingest', 'worker', 'console', 'sandbox', 'migrate']) {
      expect(compose.services[app]?.build, app).toBe('.');
    }
    expect(readFileSync(new URL('../Dockerfile', import.meta.url), 'utf8')).toMatch(/FROM .* AS runtime/);
  });

  it('keeps the sandbox (no authentication on /control) in the dev profile only, and defaults the platform to nothing insecure', () => {
    expect(compose.services.sandbox?.profiles).toEqual(['dev']);
    for (const app of ['ingest', 'worker', 'console']) {
      const env = compose.services[app]?.environment ?? {};
      expect(env.PLATFORM_BASE_URL, app).not.toMatch(/:-http:/);
      expect(env.PLATFORM_ALLOW_HTTP, app).toBe('${PLATFORM_ALLOW_HTTP:-false}');
    }
  });
});

/** An env file as compose reads it: NAME=value lines, comments and blank lines skipped. */
function envFile(path: string): Record<string, string> {
  const text = readFileSync(new URL(`../${path}`, import.meta.url), 'utf8');
  return Object.fromEntries(
    text
      .split('\n')
      .filter((l) => l.trim() && !l.trimStart().startsWith('#'))
      .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
  );
}

/** Compose's interpolation of `${NAME}`, `${NAME-default}`, `${NAME:-default}` and `${NAME:?error}`. */
function interpolate(value: string, vars: Record<string, string>): string {
  return value.replace(/\$\{(\w+)(?:(:?-|:\?)([^}]*))?\}/g, (_, name: string, op: string | undefined, arg: string) => {
    const v = vars[name];
    if (op === '-') return v ?? arg;
    if (op === ':-') return v ? v : arg;
    if (op === ':?') {
      if (!v) throw new Error(`${name}: ${arg}`);
      return v;
    }
    return v ?? '';
  });
}

/** The environment compose gives `service` with these variables, read by our own config loader. */
function appConfig(service: string, vars: Record<string, string>) {
  const env = Object.fromEntries(Object.entries(compose.services[service]?.environment ?? {}).map(([k, v]) => [k, interpolate(String(v), vars)]));
  return loadConfig({ ...env, MERCHANT_PRIVATE_KEY_FILE: '/run/secrets/k', LOG_LEVEL: 'silent' }, 'cli');
}

describe('docker-compose.yml Redis topologies', () => {
  const base = { CONSOLE_TOKEN: 'a-console-token-of-16+' };
  const apps = ['ingest', 'worker', 'console'];

  it('points every app at the single durable Redis by default', () => {
    for (const app of apps) expect(redisTargetOf(appConfig(app, base)), app).toEqual({ kind: 'single', url: 'redis://redis:6379' });
  });

  it('profile sentinel: a durable replica and three sentinels (quorum 2); its env file points every app at them, replicated acks on', () => {
    const inProfile = Object.entries(compose.services).filter(([, s]) => s.profiles?.includes('sentinel'));
    expect(inProfile.map(([name]) => name).sort()).toEqual(['redis-replica', 'sentinel-1', 'sentinel-2', 'sentinel-3']);
    const replica = compose.services['redis-replica']!;
    expect(flag(replica.command, '--replicaof')).toBe('redis');
    expect(flag(replica.command, '--appendfsync')).toBe('always');
    expect(flag(replica.command, '--maxmemory-policy')).toBe('noeviction');
    for (const name of ['sentinel-1', 'sentinel-2', 'sentinel-3']) {
      expect(compose.services[name]?.command?.join(' '), name).toMatch(/sentinel monitor mcb redis 6379 2/);
      expect(compose.services[name]?.healthcheck?.test, name).toBeDefined();
    }
    const vars = { ...base, ...envFile('deploy/compose/sentinel.env') };
    for (const app of apps) {
      const config = appConfig(app, vars);
      expect(redisTargetOf(config), app).toEqual({
        kind: 'sentinel',
        name: 'mcb',
        sentinels: ['sentinel-1', 'sentinel-2', 'sentinel-3'].map((host) => ({ host, port: 26379 })),
      });
      expect(config.INGEST_MIN_REPLICAS, app).toBe(1);
      expect(compose.services[app]?.depends_on?.['sentinel-1'], app).toEqual({ condition: 'service_healthy', required: false });
    }
  });

  it('profile cluster: three durable cluster masters joined once; its env file points every app at them with a hash-tagged prefix', () => {
    const nodes = ['redis-cluster-1', 'redis-cluster-2', 'redis-cluster-3'];
    for (const name of nodes) {
      const node = compose.services[name]!;
      expect(node.profiles, name).toEqual(['cluster']);
      expect(flag(node.command, '--cluster-enabled'), name).toBe('yes');
      expect(flag(node.command, '--appendfsync'), name).toBe('always');
      expect(flag(node.command, '--maxmemory-policy'), name).toBe('noeviction');
    }
    const init = compose.services['redis-cluster-init']!;
    expect(init.profiles).toEqual(['cluster']);
    expect(init.command?.join(' ')).toMatch(/--cluster create[\s\S]*--cluster-replicas 0 --cluster-yes/);
    const vars = { ...base, ...envFile('deploy/compose/cluster.env') };
    for (const app of apps) {
      const config = appConfig(app, vars);
      expect(redisTargetOf(config), app).toEqual({ kind: 'cluster', nodes: nodes.map((host) => ({ host, port: 6379 })) });
      expect(config.QUEUE_PREFIX, app).toBe('{mcb}');
      expect(compose.services[app]?.depends_on?.['redis-cluster-init'], app).toEqual({ condition: 'service_completed_successfully', required: false });
    }
    // Without the hash tag the apps would refuse to start, and say why.
    expect(() => appConfig('worker', { ...vars, QUEUE_PREFIX: 'mcb' })).toThrow(/QUEUE_PREFIX: must hold a hash tag/);
  });
});
