import { test } from 'vitest';
import { openTestEnv, testServices, type TestEnv } from './index.ts';
import { startFakePlatform, type FakePlatform, type FakePlatformOptions } from './platform-double.ts';
import type { TestServices } from './services.ts';
import { startHarness, type Harness, type HarnessOptions } from './worker-harness.ts';

/**
 * The worker tests' one fixture (`test.extend`; every part made once per file, on first use): `env`, the file's own
 * database clone, queue prefix and pool; `platform`, the platform double (`platformOptions`); `h`, a harness (queue and
 * runWorker runners) on both, built with `harnessOptions`. A file sets its options by extending it again:
 *
 *     const it = workerTest.extend('harnessOptions', { scope: 'file' }, { orderGracePeriodMs: 2500 });
 *
 * or makes them from other parts with a fixture function (`async ({ env }) => ({ workerDatabaseUrl: ... })`). A part
 * no test of a file asks for is never made; each is closed after the file's last test, `h` first.
 */
export const workerTest = test
  .extend('services', { scope: 'worker' }, (): TestServices => testServices())
  .extend('harnessOptions', { scope: 'file' }, {} as HarnessOptions)
  .extend('platformOptions', { scope: 'file' }, {} as FakePlatformOptions)
  .extend('env', { scope: 'file' }, async ({ services }, { onCleanup }): Promise<TestEnv> => {
    const env = await openTestEnv(services);
    onCleanup(() => env.close());
    return env;
  })
  .extend('platform', { scope: 'file' }, async ({ platformOptions }, { onCleanup }): Promise<FakePlatform> => {
    const platform = await startFakePlatform(platformOptions);
    onCleanup(() => platform.close());
    return platform;
  })
  .extend('h', { scope: 'file' }, async ({ env, platform, harnessOptions }, { onCleanup }): Promise<Harness> => {
    const h = await startHarness(env, platform.url, harnessOptions);
    onCleanup(() => h.close());
    return h;
  });
