/**
 * Preloaded by every pnpm script that starts a process or a command (`node --import ./scripts/load-env.ts ...`):
 * the local `.env` file, when there is one, fills in the variables the environment does not set. A variable set in
 * the real environment always wins; a setting that loosens a check is never taken from the file, and a Redis
 * topology chosen in the environment replaces the file's (scripts/lib/env-file.ts). `node apps/<app>/src/main.ts`
 * run directly (containers, tests) reads the environment only.
 */
import { existsSync, readFileSync } from 'node:fs';
import { applyEnvFile, localEnvFile } from './lib/env-file.ts';

const file = localEnvFile();
if (file && existsSync(file)) {
  for (const note of applyEnvFile(readFileSync(file, 'utf8'), process.env, file))
    process.stderr.write(`note: ${note}\n`);
}
