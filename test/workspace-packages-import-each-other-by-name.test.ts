import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// The boundaries hold: code in one workspace package (apps/*, packages/*) reaches another only through that package's
// name and entry, declared in its package.json, never by a relative path into its src (the console's tests once
// imported ../../sandbox/src/app.ts, and the demo's driver apps/sandbox/src/app.ts). The same for the repository's
// own tools (scripts/, bench/). The suites under test/ are the one exception: they test the apps together and reach
// into their internals on purpose (ingest's enqueuer, the worker's harness).
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const files = execFileSync('git', ['ls-files', '--', '*.ts'], { cwd: ROOT, encoding: 'utf8' }).trim().split('\n');

/** The workspace package a path belongs to (`apps/console`), `tools` for scripts/ and bench/, or undefined. */
function ownerOf(path: string): string | undefined {
  const m = /^(apps|packages)\/([^/]+)\//.exec(path);
  if (m) return `${m[1]}/${m[2]}`;
  return /^(scripts|bench)\//.test(path) ? 'tools' : undefined;
}

/** Every relative module specifier of a file: static imports and exports, and `import('...')`. */
function relativeSpecifiers(text: string): string[] {
  const found = [...text.matchAll(/(?:\bfrom\s+|\bimport\s*\(\s*|^\s*import\s+)['"](\.{1,2}\/[^'"]+)['"]/gm)].map(
    (m) => m[1]!,
  );
  return [...new Set(found)];
}

describe('imports between workspace packages', () => {
  it('never reach into another package by a relative path', () => {
    const crossings: string[] = [];
    for (const file of files) {
      const owner = ownerOf(file);
      if (!owner) continue;
      for (const spec of relativeSpecifiers(readFileSync(join(ROOT, file), 'utf8'))) {
        const target = relative(ROOT, resolve(ROOT, dirname(file), spec));
        const targetOwner = ownerOf(`${target}/`) ?? ownerOf(target);
        if (targetOwner !== undefined && targetOwner !== owner && targetOwner !== 'tools')
          crossings.push(`${file} imports ${spec}`);
      }
    }
    expect(crossings).toEqual([]);
  });

  it('finds the crossing it is meant to catch', () => {
    expect(
      relativeSpecifiers(
        `import { buildApp as buildSandbox } from '../../sandbox/src/app.ts';\nimport type { D } from "../../apps/sandbox/src/app.ts";`,
      ),
    ).toEqual(['../../sandbox/src/app.ts', '../../apps/sandbox/src/app.ts']);
    expect(ownerOf(relative(ROOT, resolve(ROOT, 'apps/console/test', '../../sandbox/src/app.ts')))).toBe(
      'apps/sandbox',
    );
    expect(ownerOf('scripts/lib/demo-driver.ts')).toBe('tools');
  });
});
