/**
 * The config: one zod schema, composed from one file per area (database.ts, redis.ts, platform.ts, observability.ts,
 * ingest.ts, worker.ts, console.ts, sandbox.ts), parsed once by each process's `main.ts`. A new variable goes into
 * its area's file with its doc comment and default; `pnpm env:example` writes it into `.env.example`.
 */
import { z } from 'zod';
import { AppError, ErrorCodes } from '../errors.ts';
import { consoleAuthProblems, consoleFields, consoleWarnings } from './console.ts';
import { databaseFields } from './database.ts';
import { ingestFields, ingestProblems } from './ingest.ts';
import { merchantsFields, merchantsOf, type Merchant } from './merchants.ts';
import { observabilityFields } from './observability.ts';
import { platformFields, platformProblems, platformWarnings } from './platform.ts';
import { redisFields, redisTopologyProblems } from './redis.ts';
import { APP_ROLES, type AppRole } from './role.ts';
import { sandboxFields } from './sandbox.ts';
import { workerFields } from './worker.ts';

export { parseDuration } from './duration.ts';
export { addressMatcher, ipv6Groups, parseSourceRanges, type SourceRange } from './source-ranges.ts';
export { hashTagOf } from './redis.ts';
export { APP_ROLES, type AppRole } from './role.ts';
export {
  DEFAULT_MERCHANT_REF,
  MAX_MERCHANTS,
  MERCHANT_REF_PATTERN,
  legacyMerchant,
  merchantByRef,
  parseMerchantsFile,
  type Merchant,
} from './merchants.ts';

/**
 * Every environment variable the pipeline reads, with its default, area by area (the order of `.env.example`). The
 * public ones are docs/design.md's contract; the rest are documented in README's configuration table.
 */
const schema = z.object({
  ...databaseFields,
  ...redisFields,
  ...platformFields,
  ...merchantsFields,
  ...observabilityFields,
  ...ingestFields,
  ...workerFields,
  ...consoleFields,
  ...sandboxFields,
});

type ConfigValues = z.output<typeof schema>;
/**
 * The parsed environment, the role that read it, and the merchants it serves (MERCHANTS_FILE, or the one `default`
 * merchant MERCHANT_NO makes): code below `main.ts` takes a {@link Merchant}, never MERCHANT_NO.
 */
export type Config = Readonly<ConfigValues> & { readonly role: AppRole; readonly merchants: readonly Merchant[] };

/** Variables a role cannot start without. */
const REQUIRED: Record<AppRole, readonly (keyof ConfigValues)[]> = {
  ingest: ['MERCHANT_NO', 'MERCHANT_PRIVATE_KEY_FILE'],
  worker: ['MERCHANT_NO', 'PLATFORM_BASE_URL'],
  console: ['MERCHANT_NO', 'PLATFORM_BASE_URL'],
  sandbox: [],
  cli: [],
};

/** What MERCHANTS_FILE holds per merchant instead. */
const MERCHANTS_FILE_REPLACES: readonly (keyof ConfigValues)[] = ['MERCHANT_NO', 'MERCHANT_PRIVATE_KEY_FILE'];

/** Settings a role needs one of: the first is named in the error, the second is its fallback. */
const REQUIRED_EITHER: Partial<Record<AppRole, readonly (readonly [keyof ConfigValues, keyof ConfigValues])[]>> = {
  console: [['CONSOLE_TOKEN', 'CONSOLE_OPERATORS_FILE']],
  sandbox: [
    ['SANDBOX_MERCHANT_NO', 'MERCHANT_NO'],
    ['SANDBOX_MERCHANT_PUBLIC_KEY_FILE', 'MERCHANT_PRIVATE_KEY_FILE'],
  ],
};

/** One variable of the schema: its name, its default as written in the environment, and which roles require it. */
export interface ConfigVariable {
  name: string;
  defaultValue: string | undefined;
  requiredFor: AppRole[];
}

/** The default a schema entry gives an unset variable (found through its pipes and wrappers), as text. */
function defaultOf(entry: z.ZodType): string | undefined {
  const queue: unknown[] = [entry];
  for (let seen = 0; queue.length > 0 && seen < 20; seen++) {
    const def = (
      queue.shift() as {
        _zod: { def: { type: string; defaultValue?: unknown; in?: unknown; out?: unknown; innerType?: unknown } };
      }
    )._zod.def;
    if (def.type === 'default') return String(def.defaultValue);
    queue.push(...[def.in, def.innerType, def.out].filter(Boolean));
  }
  return undefined;
}

/** Every variable the config schema reads, in schema order (for `.env.example` and its drift test). */
export function configVariables(): ConfigVariable[] {
  return Object.entries(schema.shape).map(([name, entry]) => ({
    name,
    defaultValue: defaultOf(entry as z.ZodType),
    requiredFor: APP_ROLES.filter((role) => (REQUIRED[role] as readonly string[]).includes(name)),
  }));
}

/**
 * Checks across variables, area by area, once every variable parsed: one line per problem. `named`: the problems
 * found before them.
 */
function crossChecks(values: ConfigValues, env: Record<string, string | undefined>, role: AppRole, named: string[]) {
  return [
    ...platformProblems(values, role, named),
    ...redisTopologyProblems(values, env),
    ...consoleAuthProblems(values, role),
    ...ingestProblems(values),
  ];
}

/** One line per problem: `NAME: what was wrong (got "…")`. */
function describeIssues(issues: readonly z.core.$ZodIssue[], env: Record<string, string | undefined>): string[] {
  return issues.map((issue) => {
    const name = String(issue.path[0] ?? '(root)');
    const raw = env[name];
    const got = raw === undefined ? 'unset' : `got ${JSON.stringify(raw.length > 60 ? `${raw.slice(0, 57)}...` : raw)}`;
    const secret = /TOKEN|KEY|SECRET/.test(name) ? 'value hidden' : got;
    return `${name}: ${issue.message} (${secret})`;
  });
}

/**
 * `problems` (each variable's own, from the parse) followed by what the role adds: required variables unset, the
 * checks across variables, and the pairs of which the role needs one.
 */
function roleProblems(
  values: ConfigValues | undefined,
  env: Record<string, string | undefined>,
  role: AppRole,
  problems: string[],
): string[] {
  const found = [...problems];
  const merchantsFile = values ? values.MERCHANTS_FILE !== undefined : Boolean(env.MERCHANTS_FILE?.trim());
  for (const name of REQUIRED[role]) {
    if (merchantsFile && MERCHANTS_FILE_REPLACES.includes(name)) continue;
    // With MERCHANTS_FILE, merchantPlatformProblems names PLATFORM_BASE_URL only when a merchant lacks its own.
    if (merchantsFile && name === 'PLATFORM_BASE_URL') continue;
    const alreadyNamed = found.some((p) => p.startsWith(`${name}:`));
    if (!alreadyNamed && (values ? values[name] === undefined : !env[name]?.trim())) {
      found.push(`${name}: required for ${role} (unset)`);
    }
  }
  if (values) found.push(...crossChecks(values, env, role, found));
  for (const [name, fallback] of REQUIRED_EITHER[role] ?? []) {
    const set = (n: string) => (values ? values[n as keyof typeof values] !== undefined : Boolean(env[n]?.trim()));
    if (!set(name) && !set(fallback) && !found.some((p) => p.startsWith(`${name}:`))) {
      found.push(`${name}: required for ${role} (or ${fallback} to fall back on) (unset)`);
    }
  }
  return found;
}

/**
 * Parse and validate the environment once. Throws one {@link AppError} `CONFIG_INVALID` whose message lists every
 * bad or missing variable by name. Only `main.ts` files call this; everything else receives the frozen result.
 */
export function loadConfig(env: Record<string, string | undefined> = process.env, role: AppRole = 'cli'): Config {
  const parsed = schema.safeParse(env);
  let problems = parsed.success ? [] : describeIssues(parsed.error.issues, env);
  if (parsed.success || problems.length > 0) {
    problems = roleProblems(parsed.success ? parsed.data : undefined, env, role, problems);
  }
  const merchants = parsed.success ? merchantsOf(parsed.data, role) : { merchants: [], problems: [] };
  problems.push(...merchants.problems);
  if (parsed.success) problems.push(...merchantPlatformProblems(parsed.data, merchants.merchants, role, problems));
  if (problems.length > 0 || !parsed.success) {
    throw new AppError(ErrorCodes.CONFIG_INVALID, `invalid configuration:\n  - ${problems.join('\n  - ')}`, {
      details: { problems },
    });
  }
  return Object.freeze({ ...parsed.data, role, merchants: Object.freeze(merchants.merchants) });
}

/**
 * Each merchant's platform: worker and console need a base URL for every merchant (its own or PLATFORM_BASE_URL),
 * and a merchant's own http URL needs PLATFORM_ALLOW_HTTP as PLATFORM_BASE_URL does.
 */
function merchantPlatformProblems(
  values: ConfigValues,
  merchants: readonly Merchant[],
  role: AppRole,
  named: readonly string[],
): string[] {
  const problems: string[] = [];
  const needsUrl = role === 'worker' || role === 'console';
  if (
    needsUrl &&
    values.MERCHANTS_FILE !== undefined &&
    values.PLATFORM_BASE_URL === undefined &&
    !named.some((p) => p.startsWith('PLATFORM_BASE_URL:'))
  ) {
    const without = merchants.filter((m) => m.platformBaseUrl === undefined).map((m) => `"${m.ref}"`);
    if (without.length > 0) {
      problems.push(
        `PLATFORM_BASE_URL: required for ${role} by merchants without platformBaseUrl (${without.join(', ')})`,
      );
    }
  }
  for (const m of merchants) {
    if (m.platformBaseUrl === undefined) continue;
    const own = platformProblems({ ...values, PLATFORM_BASE_URL: m.platformBaseUrl }, role, []);
    if (own.length > 0)
      problems.push(
        `MERCHANTS_FILE: merchant "${m.ref}".platformBaseUrl: ${own[0]!.replace(/^PLATFORM_BASE_URL: /, '')}`,
      );
  }
  return problems;
}

/**
 * Settings that are allowed but unsafe in production, one line each; every main logs them at warn on start.
 */
export function configWarnings(config: Config): string[] {
  return [...consoleWarnings(config), ...platformWarnings(config)];
}
