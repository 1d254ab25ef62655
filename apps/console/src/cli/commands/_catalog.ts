import { createCatalogCache, type CatalogCache } from '@mcb/core/catalog';
import { loadConfig } from '@mcb/core/config';
import { createDb } from '@mcb/core/db';
import { AppError, ErrorCodes } from '@mcb/core/errors';
import { createLogger } from '@mcb/core/logger';
import { createPlatformClient } from '@mcb/core/platform';

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
  const missing = (['MERCHANT_NO', 'PLATFORM_BASE_URL'] as const).filter((name) => config[name] === undefined);
  if (missing.length > 0) {
    throw new AppError(ErrorCodes.CONFIG_INVALID, `invalid configuration:\n  - ${missing.map((n) => `${n}: required for this command (unset)`).join('\n  - ')}`);
  }
  const logger = createLogger({ name: 'cli', level: env.LOG_LEVEL ?? 'warn', destination: process.stderr });
  const db = createDb(config.DATABASE_URL, { max: 2, applicationName: 'mcb-cli', connectionTimeoutMs: 3000 });
  const platform = createPlatformClient({
    baseUrl: config.PLATFORM_BASE_URL!,
    merchantNo: config.MERCHANT_NO!,
    contentType: config.PLATFORM_CONTENT_TYPE,
    timeoutMs: config.PLATFORM_TIMEOUT,
  });
  return {
    catalog: createCatalogCache({ db, platform, logger }),
    async close() {
      await platform.close();
      await db.close();
    },
  };
}
