import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { drizzleFileOf } from '@mcb/core/module-hooks';

const CORE = resolve(import.meta.dirname, '..');
const HOOKS = pathToFileURL(resolve(CORE, 'src/module-hooks.ts')).href;

/**
 * A Node process that loads drizzle-orm's entry points the apps use and prints how each import made by one of
 * drizzle's files resolved (specifier, parent, URL, format), as seen above every other hook: with the module hooks
 * registered first when `withHooks`, with Node's resolver alone otherwise.
 */
function resolutions(withHooks: boolean): Promise<Map<string, string>> {
  const script = `
    import { registerHooks } from 'node:module';
    ${withHooks ? `await import(${JSON.stringify(HOOKS)});` : ''}
    const seen = [];
    registerHooks({
      resolve(specifier, context, next) {
        const r = next(specifier, context);
        if (context.parentURL?.includes('/node_modules/drizzle-orm/')) seen.push([specifier, context.parentURL, r.url, r.format]);
        return r;
      },
    });
    await import('drizzle-orm');
    await import('drizzle-orm/pg-core');
    await import('drizzle-orm/node-postgres');
    await import('drizzle-orm/node-postgres/migrator');
    process.stdout.write(JSON.stringify(seen));
  `;
  return new Promise((done, fail) =>
    execFile(
      process.execPath,
      ['--input-type=module', '-e', script],
      { cwd: CORE, maxBuffer: 64 * 1024 * 1024 },
      (err, stdout, stderr) => {
        if (err) return fail(new Error(`${err.message}\n${stderr}`));
        const rows = JSON.parse(stdout) as [string, string, string, string][];
        done(
          new Map(rows.map(([specifier, parent, url, format]) => [`${parent} -> ${specifier}`, `${url} (${format})`])),
        );
      },
    ),
  );
}

describe('the module hooks (drizzle-orm resolved without re-reading its package.json)', () => {
  it('resolve every import of drizzle-orm the apps load to the same file and format as Node does', async () => {
    const [node, hooked] = await Promise.all([resolutions(false), resolutions(true)]);
    // The apps' entry points pull in hundreds of drizzle's files: the comparison covers them all.
    expect(node.size).toBeGreaterThan(100);
    expect([...hooked.keys()].sort()).toEqual([...node.keys()].sort());
    const differ = [...node].filter(([key, value]) => hooked.get(key) !== value);
    expect(differ).toEqual([]);
  });

  it('take the shortcut only for a relative .js import inside an installed drizzle-orm', () => {
    const root = `${pathToFileURL(CORE).href}/node_modules/drizzle-orm/`;
    const parent = `${root}pg-core/columns/text.js`;
    // Which file a drizzle file's own relative import names, as Node would (the package declares "type": "module").
    expect(drizzleFileOf('./common.js', parent)).toBe(`${root}pg-core/columns/common.js`);
    expect(drizzleFileOf('../../entity.js', parent)).toBe(`${root}entity.js`);
    // Everything else goes to Node's resolver.
    expect(drizzleFileOf('../../../outside.js', parent)).toBeUndefined(); // leaves the package
    expect(drizzleFileOf('pg', parent)).toBeUndefined(); // a bare specifier: another package
    expect(drizzleFileOf('./common.cjs', parent)).toBeUndefined();
    expect(drizzleFileOf('./common.js?x=1', parent)).toBeUndefined();
    expect(drizzleFileOf('./common.js', undefined)).toBeUndefined();
    expect(drizzleFileOf('./x.js', pathToFileURL(resolve(CORE, 'src/db/client.ts')).href)).toBeUndefined();
    expect(drizzleFileOf('./x.js', 'data:text/javascript,/node_modules/drizzle-orm/')).toBeUndefined();
  });

  it('leave a package that does not declare its .js files ESM to Node', () => {
    // A folder named like the package whose package.json is missing: its type cannot be read, so no shortcut.
    const parent = pathToFileURL(resolve(CORE, 'test/no-such-dir/node_modules/drizzle-orm/index.js')).href;
    expect(drizzleFileOf('./sql.js', parent)).toBeUndefined();
    // A copy that declares CommonJS, and one whose package.json is not JSON: Node decides for both.
    const dir = mkdtempSync(join(tmpdir(), 'mcb-hooks-'));
    try {
      for (const [copy, text] of [
        ['cjs', '{"name":"drizzle-orm","type":"commonjs"}'],
        ['bad', '{"name":'],
      ] as const) {
        const root = join(dir, copy, 'node_modules', 'drizzle-orm');
        mkdirSync(root, { recursive: true });
        writeFileSync(join(root, 'package.json'), text);
        expect(drizzleFileOf('./sql.js', pathToFileURL(join(root, 'index.js')).href), copy).toBeUndefined();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
