import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import { configVariables, loadConfig, parseDuration } from '@mcb/core/config';
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
      ports?: string[];
      secrets?: string[];
      depends_on?: Record<string, { condition: string; required?: boolean }>;
      stop_grace_period?: string;
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

  it("waits longer than the apps' own shutdown bound before SIGKILL (compose's default is 10 s)", () => {
    const bound = parseDuration(
      configVariables().find((v) => v.name === 'WORKER_SHUTDOWN_TIMEOUT')?.defaultValue ?? '',
    )!;
    for (const app of ['ingest', 'worker', 'console']) {
      expect(parseDuration(compose.services[app]?.stop_grace_period ?? '10s'), app).toBeGreaterThan(bound);
    }
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
  const env = Object.fromEntries(
    Object.entries(compose.services[service]?.environment ?? {}).map(([k, v]) => [k, interpolate(String(v), vars)]),
  );
  return loadConfig({ ...env, MERCHANT_PRIVATE_KEY_FILE: '/run/secrets/k', LOG_LEVEL: 'silent' }, 'cli');
}

describe('docker-compose.yml Redis topologies', () => {
  const base = { CONSOLE_TOKEN: 'a-console-token-of-16+' };
  const apps = ['ingest', 'worker', 'console'];

  it('points every app at the single durable Redis by default', () => {
    for (const app of apps)
      expect(redisTargetOf(appConfig(app, base)), app).toEqual({ kind: 'single', url: 'redis://redis:6379' });
  });

  it('profile sentinel: two durable replicas and three sentinels (quorum 2); its env file points every app at them, replicated acks on', () => {
    const inProfile = Object.entries(compose.services).filter(([, s]) => s.profiles?.includes('sentinel'));
    expect(inProfile.map(([name]) => name).sort()).toEqual([
      'redis-replica',
      'redis-replica-2',
      'sentinel-1',
      'sentinel-2',
      'sentinel-3',
    ]);
    for (const name of ['redis-replica', 'redis-replica-2']) {
      const replica = compose.services[name]!;
      expect(flag(replica.command, '--replicaof'), name).toBe('redis');
      expect(flag(replica.command, '--appendfsync'), name).toBe('always');
      expect(flag(replica.command, '--maxmemory-policy'), name).toBe('noeviction');
      expect(compose.services['sentinel-1']?.depends_on?.[name], name).toEqual({ condition: 'service_healthy' });
    }
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
      // One replica; ingest's fence (on with REDIS_SENTINELS) refuses a stale primary's writes (docs/deployment.md).
      expect(config.INGEST_MIN_REPLICAS, app).toBe(1);
      expect(compose.services[app]?.depends_on?.['sentinel-1'], app).toEqual({
        condition: 'service_healthy',
        required: false,
      });
    }
  });

  it('recommends, with the sentinel profile, min-replicas-to-write 1 on every data node (a replaced primary cannot acknowledge) and leaves the single node writable', () => {
    const sentinelVars = envFile('deploy/compose/sentinel.env');
    for (const name of ['redis', 'redis-replica', 'redis-replica-2']) {
      const command = compose.services[name]?.command;
      expect(interpolate(flag(command, '--min-replicas-to-write') ?? '', sentinelVars), name).toBe('1');
      expect(flag(command, '--min-replicas-max-lag'), name).toBe('10');
      // Without the sentinel env file (one node, no replica) Redis must not refuse every write.
      expect(interpolate(flag(command, '--min-replicas-to-write') ?? '', {}), name).toBe('0');
    }
    expect(sentinelVars.INGEST_MIN_REPLICAS).toBe('1');
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
      expect(redisTargetOf(config), app).toEqual({
        kind: 'cluster',
        nodes: nodes.map((host) => ({ host, port: 6379 })),
      });
      expect(config.QUEUE_PREFIX, app).toBe('{mcb}');
      expect(compose.services[app]?.depends_on?.['redis-cluster-init'], app).toEqual({
        condition: 'service_completed_successfully',
        required: false,
      });
    }
    // Without the hash tag the apps would refuse to start, and say why.
    expect(() => appConfig('worker', { ...vars, QUEUE_PREFIX: 'mcb' })).toThrow(/QUEUE_PREFIX: must hold a hash tag/);
  });
});

describe('docker-compose.yml settings', () => {
  const token = { CONSOLE_TOKEN: 'a-console-token-of-16+' };
  const own = envFile('deploy/compose/compose.env');

  it('needs no console token to start the databases alone (no `:?` anywhere); the console itself then refuses, naming both ways to log in', () => {
    const text = readFileSync(new URL('../docker-compose.yml', import.meta.url), 'utf8');
    // Compose interpolates the whole file for every command: a required variable would fail `up -d postgres redis` too.
    expect(text).not.toMatch(/\$\{\w+:\?/);
    const env = Object.fromEntries(
      Object.entries(compose.services.console?.environment ?? {}).map(([k, v]) => [
        k,
        interpolate(String(v), { ...own, MERCHANT_NO: 'M100001', PLATFORM_BASE_URL: 'https://platform.example' }),
      ]),
    );
    expect(() => loadConfig({ ...env, LOG_LEVEL: 'silent' }, 'console')).toThrow(
      /CONSOLE_TOKEN.*CONSOLE_OPERATORS_FILE|CONSOLE_OPERATORS_FILE.*CONSOLE_TOKEN/s,
    );
  });

  it('has its own env file, never the .env pnpm dev writes (127.0.0.1 inside a container is the container)', () => {
    const header = readFileSync(new URL('../docker-compose.yml', import.meta.url), 'utf8').split('\nname:')[0]!;
    const docs = ['README.md', 'docs/deployment.md'].map((f) =>
      readFileSync(new URL(`../${f}`, import.meta.url), 'utf8'),
    );
    for (const text of [header, ...docs]) {
      expect(text).not.toMatch(/--env-file \.env\b/);
    }
    expect(header).toMatch(/--env-file deploy\/compose\/compose\.env/);
    expect(docs[1]).toMatch(/--env-file deploy\/compose\/compose\.env/);
    // Nothing in it that only fits this machine, and nothing that loosens a check.
    expect(Object.values(own).join('\n')).not.toMatch(/127\.0\.0\.1|localhost/);
    expect(Object.keys(own)).not.toContain('PLATFORM_ALLOW_HTTP');
    expect(Object.keys(own)).not.toContain('INGEST_ALLOW_VOLATILE_REDIS');
    expect(Object.keys(own)).not.toContain('CONSOLE_TOKEN');
  });

  it('with it and a merchant filled in, every app starts on the durable Redis and an https platform; without the platform it says what is missing', () => {
    const vars = { ...own, ...token, MERCHANT_NO: 'M100001', PLATFORM_BASE_URL: 'https://platform.example' };
    for (const app of ['ingest', 'worker', 'console']) {
      const config = appConfig(app, vars);
      expect(redisTargetOf(config), app).toEqual({ kind: 'single', url: 'redis://redis:6379' });
      expect(config.PLATFORM_ALLOW_HTTP, app).toBe(false);
      expect(config.INGEST_ALLOW_VOLATILE_REDIS, app).toBe(false);
      expect(config.QUEUE_PREFIX, app).toBe('mcb');
    }
    const env = (app: string) =>
      Object.fromEntries(
        Object.entries(compose.services[app]?.environment ?? {}).map(([k, v]) => [
          k,
          interpolate(String(v), { ...own, ...token }),
        ]),
      );
    expect(() => loadConfig({ ...env('worker'), LOG_LEVEL: 'silent' }, 'worker')).toThrow(
      /MERCHANT_NO: required for worker[\s\S]*PLATFORM_BASE_URL: required for worker/,
    );
  });

  it("the ops listeners listen on the container's interface (Prometheus on the compose network scrapes them), never published on the host", () => {
    const metrics = {
      ingest: ['INGEST_METRICS_HOST', 'INGEST_METRICS_PORT', 9464],
      worker: ['WORKER_METRICS_HOST', 'WORKER_METRICS_PORT', 9465],
      console: ['CONSOLE_METRICS_HOST', 'CONSOLE_METRICS_PORT', 9466],
    } as const;
    for (const [app, [hostVar, portVar, port]] of Object.entries(metrics)) {
      const config = appConfig(app, { ...own, ...token });
      expect(config[hostVar], app).toBe('0.0.0.0');
      expect(config[portVar], app).toBe(port);
      expect((compose.services[app]?.ports ?? []).join(' '), app).not.toContain(String(port));
    }
    // The worker and console are healthy only once started (after the schema check), as ingest is once ready.
    expect(String(compose.services.worker?.healthcheck?.test)).toContain('127.0.0.1:9465/healthz');
    expect(String(compose.services.console?.healthcheck?.test)).toContain('127.0.0.1:9466/healthz');
  });

  it('profile dev: the sandbox env file points the apps at the simulated platform, which calls back ingest on the compose network', () => {
    const vars = { ...own, ...token, ...envFile('deploy/compose/sandbox.env') };
    expect(appConfig('worker', vars).PLATFORM_BASE_URL).toBe('http://sandbox:8090');
    const sandbox = appConfig('sandbox', vars);
    expect(sandbox.SANDBOX_PAYIN_CALLBACK_URL).toBe('http://ingest:8080/callbacks/payin');
    expect(sandbox.SANDBOX_PAYOUT_CALLBACK_URL).toBe('http://ingest:8080/callbacks/payout');
    expect(compose.services.sandbox?.secrets).toEqual(['merchant_private_key']);
    // Without sandbox.env, an http platform is refused.
    expect(() =>
      loadConfig(
        {
          ...Object.fromEntries(
            Object.entries(compose.services.worker?.environment ?? {}).map(([k, v]) => [
              k,
              interpolate(String(v), { ...own, ...token, MERCHANT_NO: 'M1', PLATFORM_BASE_URL: 'http://sandbox:8090' }),
            ]),
          ),
          LOG_LEVEL: 'silent',
        },
        'worker',
      ),
    ).toThrow(/PLATFORM_BASE_URL: expected an https URL/);
  });
});
