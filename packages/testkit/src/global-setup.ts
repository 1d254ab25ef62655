import { randomBytes } from 'node:crypto';
import { migrateDatabase } from '@mcb/core/db';
import pg from 'pg';
import type * as TestcontainersModule from 'testcontainers';
import type { TestProject } from 'vitest/node';
import { fileURLToPath } from 'node:url';
import { MERCHANT_NO } from './fixtures.ts';
import {
  INSTALL_SERVICES,
  missingForPlan,
  ownServicesFolder,
  ownServicesSwitch,
  planForDefaults,
  startOwnServices,
  type OwnServicesPlan,
} from './own-services.ts';
import { canConnect, HOW_TO_START, LOCAL_DATABASE_URL, LOCAL_REDIS_URL, type TestServices } from './services.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    services: TestServices;
    /** The migrated template database each test file clones. */
    templateDatabase: string;
  }
}

type Testcontainers = typeof TestcontainersModule;

const STALE_MS = 6 * 3600_000;

async function startContainers(): Promise<{ services: TestServices; stop: () => Promise<void> }> {
  let tc: Testcontainers;
  try {
    tc = await import('testcontainers');
  } catch {
    throw new Error('testcontainers is not installed');
  }
  try {
    const pgc = await new tc.GenericContainer('postgres:17-alpine')
      .withEnvironment({ POSTGRES_HOST_AUTH_METHOD: 'trust' })
      .withExposedPorts(5432)
      .withWaitStrategy(tc.Wait.forLogMessage(/database system is ready to accept connections/, 2))
      .start();
    const rc = await new tc.GenericContainer('redis:7-alpine')
      .withCommand([
        'redis-server',
        '--appendonly',
        'yes',
        '--appendfsync',
        'always',
        '--maxmemory-policy',
        'noeviction',
      ])
      .withExposedPorts(6379)
      .start();
    return {
      services: {
        databaseUrl: `postgres://postgres@${pgc.getHost()}:${pgc.getMappedPort(5432)}/postgres`,
        redisUrl: `redis://${rc.getHost()}:${rc.getMappedPort(6379)}`,
        source: 'testcontainers',
      },
      stop: async () => {
        await Promise.allSettled([pgc.stop(), rc.stop()]);
      },
    };
  } catch (e) {
    throw new Error(`no Docker engine for containers either (${(e as Error).message})`);
  }
}

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));

/** Own Postgres and/or Redis in `.data/own-services/test/` (the other one, if any, is the local default). */
async function startOwn(plan: OwnServicesPlan): Promise<{ services: TestServices; stop: () => Promise<void> }> {
  const own = await startOwnServices({
    plan,
    folder: ownServicesFolder(ROOT, 'test', process.env),
    command: 'test',
    durable: false,
  });
  console.log(own.line);
  return {
    services: {
      databaseUrl: own.databaseUrl ?? LOCAL_DATABASE_URL,
      redisUrl: own.redisUrl ?? LOCAL_REDIS_URL,
      source: 'own',
    },
    stop: () => own.stop(),
  };
}

/**
 * Where the run's services are, in this order: DATABASE_URL/REDIS_URL when set (never replaced); the local defaults
 * when both answer; else own servers for what does not answer (the machine's redis-server and Postgres binaries:
 * a few seconds, nothing to pull, the same servers `pnpm demo` starts); else containers where a Docker engine runs
 * (a machine without the binaries); else one message saying how to install them. MCB_OWN_SERVICES=1 starts own
 * servers whatever answers, 0 never.
 */
async function resolveServices(): Promise<{ services: TestServices; stop: () => Promise<void> }> {
  const mode = ownServicesSwitch(process.env);
  if (mode === 'always')
    return startOwn({
      postgres: true,
      redis: true,
      reason: `MCB_OWN_SERVICES=${process.env.MCB_OWN_SERVICES?.trim()}`,
    });
  const envDb = process.env.DATABASE_URL;
  const envRedis = process.env.REDIS_URL;
  const databaseUrl = envDb ?? LOCAL_DATABASE_URL;
  const redisUrl = envRedis ?? LOCAL_REDIS_URL;
  const [dbUp, redisUp] = await Promise.all([canConnect(databaseUrl, 5432), canConnect(redisUrl, 6379)]);
  if (dbUp && redisUp) {
    return { services: { databaseUrl, redisUrl, source: envDb || envRedis ? 'env' : 'local' }, stop: async () => {} };
  }
  if (envDb || envRedis) {
    const down = [
      !dbUp && `DATABASE_URL (${new URL(databaseUrl).host})`,
      !redisUp && `REDIS_URL (${new URL(redisUrl).host})`,
    ]
      .filter(Boolean)
      .join(' and ');
    throw new Error(`${down} not reachable.\n${HOW_TO_START}`);
  }
  const plan = planForDefaults(dbUp, redisUp);
  const missing = missingForPlan(plan);
  if (mode === 'auto' && missing.length === 0) return startOwn(plan);
  try {
    return await startContainers();
  } catch (e) {
    const own =
      mode === 'never'
        ? 'MCB_OWN_SERVICES=0 forbids starting own servers'
        : `this machine has no ${missing.join(' and ')} to start its own`;
    throw new Error(`${plan.reason}; ${own}, and ${(e as Error).message}\n${INSTALL_SERVICES}`);
  }
}

function withDatabase(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

/** Drop clones and templates left behind by runs that crashed hours ago (names carry their creation time). */
async function dropStale(admin: pg.Client): Promise<void> {
  const { rows } = await admin.query<{ datname: string }>(
    `select datname from pg_database where datname ~ '^mcb_(tpl|t)_[0-9]+_'`,
  );
  for (const { datname } of rows) {
    const created = Number(datname.split('_')[2]);
    if (Date.now() - created > STALE_MS) {
      await admin.query(`drop database if exists "${datname}" with (force)`).catch(() => {});
    }
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const { services, stop } = await resolveServices();
  const template = `mcb_tpl_${Date.now()}_${randomBytes(3).toString('hex')}`;
  const admin = new pg.Client({ connectionString: withDatabase(services.databaseUrl, 'postgres') });
  await admin.connect();
  try {
    await dropStale(admin);
    // A fresh database ends fully migrated (merchant keys built, single-merchant indexes gone). Its stored default
    // merchant is the tests' one merchant, so that rows a test writes without a merchant number are that merchant's.
    await migrateDatabase(withDatabase(services.databaseUrl, template), { defaultMerchantNo: MERCHANT_NO });
    // A template must have no connections while it is cloned; the migrator has closed its own.
    await admin.query(`alter database "${template}" with is_template true allow_connections false`);
  } finally {
    await admin.end();
  }
  project.provide('services', services);
  project.provide('templateDatabase', template);

  return async () => {
    const c = new pg.Client({ connectionString: withDatabase(services.databaseUrl, 'postgres') });
    await c.connect();
    try {
      await c.query(`alter database "${template}" with is_template false`);
      await c.query(`drop database if exists "${template}" with (force)`);
    } finally {
      await c.end();
    }
    await stop();
  };
}
