import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { AppError, ErrorCodes } from '@mcb/core/errors';
import { z } from 'zod';
import type { Operator } from './operator.ts';
import { ROLES } from './roles.ts';
import { scopeOf } from './scope.ts';

/** The name CONSOLE_TOKEN's holder goes by. */
export const TOKEN_ADMIN_NAME = 'admin';

/** One entry of CONSOLE_OPERATORS_FILE. */
export const operatorEntrySchema = z.strictObject({
  name: z
    .string()
    .regex(/^[\x21-\x7e]{1,128}$/, 'expected 1 to 128 visible ASCII characters (an email address suits)')
    .refine(
      (n) => n.toLowerCase() !== TOKEN_ADMIN_NAME,
      `the name ${TOKEN_ADMIN_NAME} is reserved for CONSOLE_TOKEN's holder`,
    )
    .describe('Unique name; what the audit trail records, and what an SSO proxy sends'),
  role: z
    .enum(ROLES)
    .describe(
      'service: a machine client (the shop) that registers orders and reads the API, nothing else, and cannot log in to the pages',
    ),
  tokenSha256: z
    .string()
    .regex(/^[0-9a-fA-F]{64}$/, 'expected the SHA-256 of the token, 64 hex characters')
    .transform((h) => h.toLowerCase())
    .optional()
    .describe('SHA-256 of the bearer token, hex; leave out for an operator who only signs in through the SSO proxy'),
  merchants: z
    .array(z.string().max(64))
    .optional()
    .describe(
      "The refs (MERCHANTS_FILE) of the merchants this operator sees and acts on; leave out for all. An unknown ref, an empty list or a duplicate refuses the console's start",
    ),
});

export type OperatorEntry = z.output<typeof operatorEntrySchema>;

/** Looks operators up by token or by name. Built once at start; a changed file takes effect on restart. */
export interface OperatorDirectory {
  /** The operator whose token this is, or undefined. */
  byToken(token: string): Operator | undefined;
  /** The operator of this name (for sessions; CONSOLE_TOKEN's `admin` included), or undefined. */
  byName(name: string): Operator | undefined;
  /** The operators file's entry of this name, never CONSOLE_TOKEN's `admin` (for the SSO proxy), or undefined. */
  byFileName(name: string): Operator | undefined;
  /**
   * The SHA-256 of the operator's current token (undefined for one without a token): what a session is bound to, so
   * that a rotated or removed token ends the sessions opened with it.
   */
  credentialOf(name: string): string | undefined;
  /** How many operators can sign in (for the start-up log). */
  readonly size: number;
}

export const sha256Hex = (s: string): string => createHash('sha256').update(s).digest('hex');

/**
 * The directory from CONSOLE_TOKEN (an admin named `admin`) and the operators file's entries. Tokens are looked up
 * by their SHA-256: the file never holds a token, and a lookup by digest reveals nothing through its timing about
 * any token's content. Two entries with one name or one token are a configuration error.
 */
export function createOperatorDirectory(options: {
  token?: string;
  operators?: readonly OperatorEntry[];
  /** The configured merchants, which an entry's `merchants` must name. @defaultValue none (no entry may be scoped) */
  merchants?: readonly { ref: string; merchantNo: string }[];
}): OperatorDirectory {
  const byDigest = new Map<string, Operator>();
  const byName = new Map<string, Operator>();
  const credentials = new Map<string, string>();
  const fromFile = new Set<string>();
  const add = (operator: Operator, digest: string | undefined, where: string) => {
    if (byName.has(operator.name))
      throw configError(`${where}: the name ${JSON.stringify(operator.name)} appears twice`);
    byName.set(operator.name, operator);
    if (digest === undefined) return;
    credentials.set(operator.name, digest);
    if (byDigest.has(digest)) throw configError(`${where}: two operators share one token`);
    byDigest.set(digest, operator);
  };
  if (options.token)
    add(Object.freeze({ name: TOKEN_ADMIN_NAME, role: 'admin' }), sha256Hex(options.token), 'CONSOLE_TOKEN');
  for (const [index, entry] of (options.operators ?? []).entries()) {
    if (entry.name.toLowerCase() === TOKEN_ADMIN_NAME)
      throw configError(`the name ${TOKEN_ADMIN_NAME} is reserved for CONSOLE_TOKEN's holder`);
    const scope = scopeOf(entry.merchants, options.merchants ?? []);
    if (scope && 'problem' in scope)
      throw configError(`[${index}.merchants] (${JSON.stringify(entry.name.slice(0, 128))}) ${scope.problem}`);
    const operator = { name: entry.name, role: entry.role, ...(scope ? { scope } : {}) };
    add(Object.freeze(operator), entry.tokenSha256, 'CONSOLE_OPERATORS_FILE');
    fromFile.add(entry.name);
  }
  return {
    byToken: (token) => byDigest.get(sha256Hex(token)),
    byName: (name) => byName.get(name),
    byFileName: (name) => (fromFile.has(name) ? byName.get(name) : undefined),
    credentialOf: (name) => credentials.get(name),
    size: byName.size,
  };
}

/** Read and check CONSOLE_OPERATORS_FILE; a problem names the entry and field. */
export function loadOperatorsFile(path: string): OperatorEntry[] {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, 'utf8'));
  } catch (e) {
    throw configError(`cannot read ${path} as JSON: ${(e as Error).message}`);
  }
  const parsed = z.array(operatorEntrySchema).safeParse(raw);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `[${i.path.join('.')}] ${i.message}`);
    throw configError(`${path}: ${problems.join('; ')}`);
  }
  return parsed.data;
}

const configError = (message: string) => new AppError(ErrorCodes.CONFIG_INVALID, `CONSOLE_OPERATORS_FILE: ${message}`);
