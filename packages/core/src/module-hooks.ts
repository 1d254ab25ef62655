/**
 * What a process registers before it loads the rest of itself: a module resolution hook that spares Node's ESM
 * resolver drizzle-orm's package.json for each of drizzle's own files.
 *
 * Why: for every module file it loads, Node asks the file's package scope for its `type`, and Node 24 parses the
 * scope's whole `exports` field again on each ask (nodejs/node#58126, open). drizzle-orm's package.json lists each of
 * its files under `exports` (178 KB in 0.45), and a process that uses the database loads a few hundred of them: about
 * 1.5 s of CPU at every start. Measured (Node 24.21, this repo's 2-core machine): `import('drizzle-orm/node-postgres')`
 * 1.9 s without this hook and 0.2 s with it; the worker's modules 3.1 and 1.6 s, the console's 3.2 and 2.3 s,
 * `pnpm cli methods` 2.7 and 1.0 s.
 *
 * What it does: a relative `.js` import made by a file of an installed `drizzle-orm` resolves to that file, as ESM, when
 * the package declares `"type": "module"` (read once per copy of the package). Anything else goes to Node's resolver
 * unchanged. An entry point imports this module first, statically, and the rest of itself with `import()`: Node
 * resolves all of a module's static imports before it runs any of them, so a hook registered by a sibling import
 * would come too late for them.
 */
import { readFileSync } from 'node:fs';
import { registerHooks } from 'node:module';

const PACKAGE_DIR = '/node_modules/drizzle-orm/';
const REGISTERED = Symbol.for('mcb.moduleHooks');

/** Whether each copy of the package (its root URL) declares its `.js` files ESM, read once per copy. */
const esmRoots = new Map<string, boolean>();

function declaresEsm(rootUrl: string): boolean {
  let esm = esmRoots.get(rootUrl);
  if (esm === undefined) {
    try {
      esm =
        (JSON.parse(readFileSync(new URL('package.json', rootUrl), 'utf8')) as { type?: unknown }).type === 'module';
    } catch {
      esm = false; // unreadable: Node's resolver decides, as without the hook
    }
    esmRoots.set(rootUrl, esm);
  }
  return esm;
}

/** The file a relative `.js` import of a drizzle-orm file names, when the shortcut applies; else undefined. */
export function drizzleFileOf(specifier: string, parentUrl: string | undefined): string | undefined {
  if (!parentUrl?.startsWith('file:') || !specifier.endsWith('.js')) return undefined;
  if (!specifier.startsWith('./') && !specifier.startsWith('../')) return undefined;
  const at = parentUrl.lastIndexOf(PACKAGE_DIR);
  if (at === -1) return undefined;
  const root = parentUrl.slice(0, at + PACKAGE_DIR.length);
  const url = new URL(specifier, parentUrl);
  if (url.search || url.hash || !url.href.startsWith(root) || !declaresEsm(root)) return undefined;
  return url.href;
}

// Once per process: vitest evaluates this again for each test file, and each registration would add a hook.
const registry = globalThis as { [REGISTERED]?: boolean };
if (!registry[REGISTERED]) {
  registry[REGISTERED] = true;
  registerHooks({
    resolve(specifier, context, nextResolve) {
      const url = drizzleFileOf(specifier, context.parentURL);
      return url ? { url, format: 'module', shortCircuit: true } : nextResolve(specifier, context);
    },
  });
}
