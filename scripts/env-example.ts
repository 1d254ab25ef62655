/**
 * `pnpm env:example`: write `.env.example` from the config schema (packages/core/src/config/index.ts, composed from
 * one file per area): every variable in schema order, its doc comment in its area's file, which processes require it,
 * and its default. A test (test/local-env-file-and-example-follow-the-config-schema.test.ts) fails when the file and
 * the schema drift.
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { configVariables } from '@mcb/core/config';

/** The config's folder: index.ts composes the schema from the area files beside it. */
export const CONFIG_DIR = fileURLToPath(new URL('../packages/core/src/config/', import.meta.url));
export const ENV_EXAMPLE = fileURLToPath(new URL('../.env.example', import.meta.url));

/** The source of every area file's fields (`export const redisFields = { ... };`), one after the other. */
export function configSource(dir: string = CONFIG_DIR): string {
  return readdirSync(dir)
    .filter((f) => f.endsWith('.ts'))
    .sort()
    .map((f) => readFileSync(join(dir, f), 'utf8'))
    .flatMap((text) => [...text.matchAll(/^export const [a-z]+Fields = \{\n[\s\S]*?\n\};$/gm)].map((m) => m[0]))
    .join('\n');
}

/** The doc comment written right above each `NAME:` entry of the fields, as one line of text. */
export function schemaDocs(source: string): Map<string, string> {
  const docs = new Map<string, string>();
  for (const m of source.matchAll(/\/\*\*((?:(?!\*\/)[\s\S])*)\*\/\s*\n\s{2}([A-Z][A-Z0-9_]*):/g)) {
    const text = m[1]!
      .split('\n')
      .map((l) => l.replace(/^\s*\*\s?/, '').trim())
      .filter(Boolean)
      .join(' ')
      .replace(/@defaultValue .*$/, '')
      .trim();
    docs.set(m[2]!, text);
  }
  return docs;
}

/** Words wrapped to lines of at most `width` characters, each prefixed with `# `. */
function comment(text: string, width = 116): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(/\s+/)) {
    if (line && line.length + 1 + word.length > width) {
      lines.push(`# ${line}`);
      line = word;
    } else line = line ? `${line} ${word}` : word;
  }
  if (line) lines.push(`# ${line}`);
  return lines;
}

export function renderEnvExample(source: string = configSource()): string {
  const docs = schemaDocs(source);
  const out = [
    '# Every setting the processes read, with its default: generated from packages/core/src/config/index.ts by',
    '# `pnpm env:example` (a test fails when the two drift). Copy what you need to `.env` at the repository root',
    '# (git-ignored; `pnpm dev` and `pnpm demo` write one for the local stack). Every process and command reads it;',
    '# a variable set in the real environment wins over the file. Durations: 500ms, 30s, 5m, 2h, 7d.',
  ];
  for (const v of configVariables()) {
    out.push('');
    const doc = docs.get(v.name);
    const required = v.requiredFor.filter((r) => r !== 'cli');
    const notes = [doc, required.length ? `Required for ${required.join(', ')}.` : ''].filter(Boolean).join(' ');
    if (notes) out.push(...comment(notes));
    out.push(`# ${v.name}=${v.defaultValue ?? ''}`);
  }
  return `${out.join('\n')}\n`;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  writeFileSync(ENV_EXAMPLE, renderEnvExample());
  console.log(`wrote ${ENV_EXAMPLE}`);
}
