import { describe, expect, it } from 'vitest';
import { configVariables } from '@mcb/core/config';
import { consoleFields } from '../src/config/console.ts';
import { databaseFields } from '../src/config/database.ts';
import { ingestFields } from '../src/config/ingest.ts';
import { merchantsFields } from '../src/config/merchants.ts';
import { observabilityFields } from '../src/config/observability.ts';
import { platformFields } from '../src/config/platform.ts';
import { redisFields } from '../src/config/redis.ts';
import { sandboxFields } from '../src/config/sandbox.ts';
import { workerFields } from '../src/config/worker.ts';

// The schema is the areas spread into one object: a name in two areas would silently keep only the last one.
const areas = {
  database: databaseFields,
  redis: redisFields,
  platform: platformFields,
  merchants: merchantsFields,
  observability: observabilityFields,
  ingest: ingestFields,
  worker: workerFields,
  console: consoleFields,
  sandbox: sandboxFields,
};

describe('config by area', () => {
  it('names each variable in exactly one area, and the schema is the areas in order', () => {
    const names = Object.values(areas).flatMap((fields) => Object.keys(fields));
    expect(new Set(names).size).toBe(names.length);
    expect(configVariables().map((v) => v.name)).toEqual(names);
  });

  it("keeps each process's own variables in its area", () => {
    for (const [area, prefix] of [
      ['redis', 'REDIS_'],
      ['ingest', 'INGEST_'],
      ['worker', 'WORKER_'],
      ['console', 'CONSOLE_'],
      ['sandbox', 'SANDBOX_'],
    ] as const) {
      const owned = configVariables().filter((v) => v.name.startsWith(prefix));
      expect(
        owned.every((v) => v.name in areas[area]),
        area,
      ).toBe(true);
    }
  });
});
