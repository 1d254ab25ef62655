import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

// `.ci/run` and developers source scripts/bootstrap.sh under `set -euo pipefail`. It must reach the caller's next
// line whether Node 24 is already on PATH or only an older Node is, and say what failed when it cannot go on.
// Offline: every case is set up so that nothing is downloaded.
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'mcb-bootstrap-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const pnpmVersion = /"packageManager":\s*"pnpm@([^"+]+)/.exec(
  spawnSync('cat', [join(ROOT, 'package.json')], { encoding: 'utf8' }).stdout,
)![1]!;

function script(path: string, body: string): void {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, `#!/usr/bin/env bash\n${body}\n`);
  chmodSync(path, 0o755);
}

function source(env: Record<string, string>) {
  const r = spawnSync(
    'bash',
    ['-c', 'set -euo pipefail; . scripts/bootstrap.sh; echo reached; command -v node; node --version'],
    {
      cwd: ROOT,
      env: { HOME: dir, ...env },
      encoding: 'utf8',
      timeout: 30_000,
    },
  );
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** A bin directory with `pnpm` answering the pinned version (and nothing else of the toolchain). */
function fakePnpm(bin: string): void {
  script(join(bin, 'pnpm'), `echo ${pnpmVersion}`);
}

describe('scripts/bootstrap.sh under set -euo pipefail', () => {
  it('reaches the next line when Node >= 22.20 and pnpm are already on PATH (no .tools installed)', () => {
    const bin = join(dir, 'have-node', 'bin');
    fakePnpm(bin);
    symlinkSync(process.execPath, join(bin, 'node'));
    const r = source({ PATH: `${bin}:/usr/bin:/bin`, TOOLS_DIR: join(dir, 'have-node', 'empty-tools') });
    expect(r.stderr).toContain('bootstrap: node v');
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain('reached');
  });

  it('puts its installed Node first when only an older Node is on PATH', () => {
    const old = join(dir, 'old-node', 'bin');
    script(join(old, 'node'), 'if [ "${1:-}" = "--version" ]; then echo v20.20.2; exit 0; fi; exit 1');
    fakePnpm(old);
    const tools = join(dir, 'old-node', 'tools');
    mkdirSync(join(tools, 'node', 'bin'), { recursive: true });
    symlinkSync(process.execPath, join(tools, 'node', 'bin', 'node'));
    const r = source({ PATH: `${old}:/usr/bin:/bin`, TOOLS_DIR: tools });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain('reached');
    expect(r.stdout).toContain(join(tools, 'node', 'bin', 'node'));
    expect(r.stdout).toContain(process.version);
  });

  it('says what failed, and stops, when it cannot install Node', () => {
    const old = join(dir, 'no-install', 'bin');
    script(join(old, 'node'), 'if [ "${1:-}" = "--version" ]; then echo v20.20.2; exit 0; fi; exit 1');
    script(join(old, 'npm'), 'echo "npm: registry unreachable" >&2; exit 1');
    const r = source({ PATH: `${old}:/usr/bin:/bin`, TOOLS_DIR: join(dir, 'no-install', 'tools') });
    expect(r.status).not.toBe(0);
    expect(r.stdout).not.toContain('reached');
    expect(r.stderr).toMatch(/bootstrap: npm install node@[\d.]+ failed/);
  });
});
