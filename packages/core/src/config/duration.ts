/** Durations in env vars: `500ms`, `30s`, `5m`, `2h`, `7d`, or a bare number of milliseconds. */
const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

export function parseDuration(text: string): number | undefined {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$/.exec(text);
  if (!m) return undefined;
  const value = Number(m[1]) * UNIT_MS[(m[2] ?? 'ms') as keyof typeof UNIT_MS];
  return Number.isFinite(value) ? Math.round(value) : undefined;
}
