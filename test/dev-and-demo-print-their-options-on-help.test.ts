import { spawnSync } from 'node:child_process';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

// `pnpm dev --help` and `pnpm demo --help` print their options and exit 0, starting nothing; an unknown option is
// exit 2 with the same usage (it was "Unknown option '--help'" and exit 2 for dev).
const root = resolve(import.meta.dirname, '..');
const run = (script: string, arg: string) =>
  spawnSync(process.execPath, ['--import', './scripts/load-env.ts', `scripts/${script}.ts`, arg], {
    cwd: root,
    encoding: 'utf8',
    timeout: 20_000,
  });

describe('the local stack scripts on --help', () => {
  for (const script of ['dev', 'demo']) {
    it(`pnpm ${script} --help prints its options, --merchants among them, and exits 0; an unknown option is exit 2`, () => {
      const help = run(script, '--help');
      expect(help.status, help.stderr).toBe(0);
      expect(help.stdout).toContain(`usage: pnpm ${script}`);
      expect(help.stdout).toContain('--merchants N');
      const bad = run(script, '--no-such-option');
      expect(bad.status).toBe(2);
      expect(bad.stderr).toContain(`usage: pnpm ${script}`);
    });
  }
});
