import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';

// No Docker engine runs on our machines, so the compose file is checked as data.
const compose = parse(readFileSync(new URL('../docker-compose.yml', import.meta.url), 'utf8'), { merge: true }) as {
  services: Record<
    string,
    { command?: string[]; healthcheck?: { test: unknown }; build?: unknown; image?: string; profiles?: string[]; environment?: Record<string, string> }
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
