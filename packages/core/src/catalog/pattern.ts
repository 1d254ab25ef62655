import { RE2JS } from 're2js';

/**
 * Field patterns come from a remote service, so they are compiled with RE2 (re2js): matching is linear in the
 * input whatever the pattern, so no pattern can hang the process (ReDoS). Patterns RE2 cannot express
 * (look-around, back-references) or that do not parse are reported as unusable, never thrown.
 *
 * Semantics: a value matches when the pattern matches somewhere in it, as JavaScript's `RegExp.test` does; the
 * platform's patterns anchor themselves with `^...$` when they mean the whole value.
 */

/** Longest pattern we compile; longer ones are reported unusable (RE2's compile cost grows with its size). */
export const MAX_PATTERN_LENGTH = 2048;

export type CompiledPattern = { ok: true; test(value: string): boolean } | { ok: false; reason: string };

const cache = new Map<string, CompiledPattern>();
const CACHE_LIMIT = 1000;

/** Compile a catalog pattern once (results are cached, bounded); never throws. */
export function compilePattern(pattern: string): CompiledPattern {
  const hit = cache.get(pattern);
  if (hit) return hit;
  const compiled = compileUncached(pattern);
  // Catalogs are small; the bound only protects against a platform that churns patterns forever.
  if (cache.size >= CACHE_LIMIT) cache.clear();
  cache.set(pattern, compiled);
  return compiled;
}

function compileUncached(pattern: string): CompiledPattern {
  if (pattern.length > MAX_PATTERN_LENGTH) {
    return { ok: false, reason: `pattern is longer than ${MAX_PATTERN_LENGTH} characters` };
  }
  try {
    const re = RE2JS.compile(pattern);
    return { ok: true, test: (value) => re.test(value) };
  } catch (e) {
    const message = e instanceof Error ? e.message : String(e);
    return { ok: false, reason: message.replace(/^error parsing regexp: /, '') };
  }
}
