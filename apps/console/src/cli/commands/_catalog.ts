import { createCatalogCache, type CatalogCache } from '@mcb/core/catalog';
import { loadConfig } from '@mcb/core/config';
import { createDb } from '@mcb/core/db';
import { isAppError } from '@mcb/core/errors';
import { createLogger } from '@mcb/core/logger';
import { createPlatformClientFromConfig, PlatformCodeError } from '@mcb/core/platform';

/** Not a command (leading underscore): the catalog cache as the CLI uses it, with everything it opened. */
export interface CliCatalog {
  catalog: CatalogCache;
  close(): Promise<void>;
}

/**
 * Open the catalog cache from the environment: the same Postgres copy the console serves, refreshed from the
 * platform when it is old. Logs go to stderr so stdout stays the command's output.
 */
export function openCatalog(env: Record<string, string | undefined>): CliCatalog {
  const config = loadConfig(env, 'cli');
  // First: it refuses a missing MERCHANT_NO or PLATFORM_BASE_URL before anything is opened.
  const platform = createPlatformClientFromConfig(config);
  const logger = createLogger({
    name: 'cli',
    level: env.LOG_LEVEL ? config.LOG_LEVEL : 'warn',
    destination: process.stderr,
  });
  const db = createDb(config.DATABASE_URL, { max: 2, applicationName: 'mcb-cli', connectionTimeoutMs: 3000 });
  return {
    catalog: createCatalogCache({ db: db.db, platform, logger }),
    async close() {
      await platform.close();
      await db.close();
    },
  };
}

/**
 * The exit status of a catalog command that failed: the platform's refusal and our own coded errors are said in one
 * line on stderr (status 1); anything else is a bug and is rethrown for the dispatcher.
 */
export function reportCatalogFailure(e: unknown): number {
  if (e instanceof PlatformCodeError) {
    console.error(`the platform refused: code ${e.platformCode}: ${e.platformMessage || '(no message)'}`);
    return 1;
  }
  if (isAppError(e)) {
    console.error(`${e.code}: ${e.message}`);
    return 1;
  }
  throw e;
}
