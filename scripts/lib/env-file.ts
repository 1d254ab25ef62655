/**
 * The local `.env` file: `.env` at the repository root, or the file `MCB_ENV_FILE` names (`none`: no file at all,
 * as the tests that start a local stack ask). Read by scripts/load-env.ts; written by `pnpm dev`/`pnpm demo`.
 *
 * Three rules keep a local file from changing what a production start in the same checkout does:
 * - a setting that loosens a check ({@link LOOSENINGS}) is never taken from a file: dev and demo give it to the
 *   processes they start, anyone else sets it in the environment;
 * - a Redis topology chosen in the environment (any of {@link REDIS_TOPOLOGY}) replaces the file's, rather than
 *   clashing with it;
 * - a file the local stack wrote (its first line is {@link GENERATED_MARKER}) describes the stack that last ran: dev
 *   and demo do not read their settings from it (they rewrite it), so `pnpm dev` after `pnpm demo` runs on dev's.
 */
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseEnv } from 'node:util';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** Settings that loosen a safety check: read from the environment only. */
export const LOOSENINGS: readonly string[] = ['INGEST_ALLOW_VOLATILE_REDIS', 'PLATFORM_ALLOW_HTTP'];
/** The variables that choose Redis: one topology, from the environment or from the file, never mixed. */
export const REDIS_TOPOLOGY: readonly string[] = [
  'REDIS_URL',
  'REDIS_SENTINELS',
  'REDIS_SENTINEL_NAME',
  'REDIS_CLUSTER_NODES',
];
/** First line of a file the local stack wrote; a user who removes it makes the file theirs. */
export const GENERATED_MARKER =
  '# mcb-local-stack: written by pnpm dev / pnpm demo for the stack they run, and rewritten by each run.';

/** What the preload took from the file, for dev and demo (one process; kept on globalThis, shared by every import). */
interface EnvFileOrigin {
  file: string | undefined;
  /** Whether the file is the local stack's own (first line {@link GENERATED_MARKER}). */
  generated: boolean;
  /** Variables set from the file (not from the environment). */
  names: Set<string>;
}
const ORIGIN = Symbol.for('mcb.envFileOrigin');
export function envFileOrigin(): EnvFileOrigin {
  const g = globalThis as { [ORIGIN]?: EnvFileOrigin };
  g[ORIGIN] ??= { file: undefined, generated: false, names: new Set() };
  return g[ORIGIN];
}

export function localEnvFile(env: Record<string, string | undefined> = process.env): string | undefined {
  const chosen = env.MCB_ENV_FILE?.trim();
  if (chosen === 'none') return undefined;
  return chosen ? resolve(chosen) : resolve(ROOT, '.env');
}

/** Whether `text` (a file's content) is one the local stack wrote. */
export function isGeneratedEnvFile(text: string): boolean {
  const first = text.split('\n', 1)[0] ?? '';
  // Files written before the marker existed began "# Written by `pnpm dev`" (or demo).
  return first === GENERATED_MARKER || /^# Written by `pnpm (dev|demo)`/.test(first);
}

/**
 * Fill `env` from the file's `text` under the rules above; a variable already in `env` always wins.
 * @returns one note per setting it refused (a loosening set to true in the file), for stderr
 */
export function applyEnvFile(text: string, env: Record<string, string | undefined>, file?: string): string[] {
  const origin = envFileOrigin();
  origin.file = file;
  origin.generated = isGeneratedEnvFile(text);
  const topologyInEnv = REDIS_TOPOLOGY.some((name) => env[name]?.trim());
  const notes: string[] = [];
  for (const [name, value = ''] of Object.entries(parseEnv(text))) {
    if (env[name] !== undefined) continue;
    if (LOOSENINGS.includes(name)) {
      if (/^(true|1|yes)$/i.test(value.trim())) {
        notes.push(
          `${file ?? '.env'}: ${name}=${value} ignored: a setting that loosens a check is read from the environment only (delete the line)`,
        );
      }
      continue;
    }
    if (topologyInEnv && REDIS_TOPOLOGY.includes(name)) continue;
    env[name] = value;
    origin.names.add(name);
  }
  return notes;
}

/**
 * The environment dev and demo read their settings from: the real environment, and a file only when it is the
 * user's own (a file the stack wrote holds the last run's settings, which are outputs, not choices).
 */
export function stackInputEnv(
  env: Record<string, string | undefined> = process.env,
): Record<string, string | undefined> {
  const origin = envFileOrigin();
  if (!origin.generated) return { ...env };
  return Object.fromEntries(Object.entries(env).filter(([name]) => !origin.names.has(name)));
}

/**
 * `NAME=value` lines as Node's parser (`util.parseEnv`) reads them back: a value with spaces, quotes or `#` is put
 * in the first of `'`, `"`, `` ` `` it does not contain (that parser has no escapes); a value that needs all three,
 * or holds a line break, is refused.
 */
export function renderEnvFile(header: string[], values: Record<string, string>): string {
  const quote = (name: string, v: string) => {
    if (/^[\w@%+=:,./-]*$/.test(v)) return v;
    const q = ["'", '"', '`'].find((c) => !v.includes(c));
    if (!q || /[\r\n]/.test(v))
      throw new Error(`${name}: cannot be written to a .env file (line break, or all three quote characters)`);
    return `${q}${v}${q}`;
  };
  return [
    ...header.map((l) => `# ${l}`),
    '',
    ...Object.entries(values).map(([k, v]) => `${k}=${quote(k, v)}`),
    '',
  ].join('\n');
}

/**
 * Write `values` to the local `.env` when there is none, or when the one there is the stack's own (its marker line);
 * never a user's file. Mode 0600: it holds the console token. Returns the file written, or undefined when a user's
 * file is there (or files are off).
 */
export function writeLocalEnvFile(
  header: string[],
  values: Record<string, string>,
  env = process.env,
): string | undefined {
  const file = localEnvFile(env);
  if (!file) return undefined;
  if (existsSync(file) && !isGeneratedEnvFile(readFileSync(file, 'utf8'))) return undefined;
  const text = `${GENERATED_MARKER}\n${renderEnvFile(header, values)}`;
  // Written beside it and renamed: a command in another shell never reads half a file.
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, text, { mode: 0o600 });
  renameSync(tmp, file);
  return file;
}
