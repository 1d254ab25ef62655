/**
 * Preloaded by every pnpm script that starts a process or a command (`node --import ./scripts/load-env.ts ...`):
 * the local `.env` file, when there is one, fills in the variables the environment does not set. A variable set in
 * the real environment always wins (Node's `process.loadEnvFile` never overwrites one). `node apps/<app>/src/main.ts`
 * run directly (containers, tests) reads the environment only.
 */
import { existsSync } from 'node:fs';
import { localEnvFile } from './lib/env-file.ts';

const file = localEnvFile();
if (file && existsSync(file)) process.loadEnvFile(file);
