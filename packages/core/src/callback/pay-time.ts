/**
 * The platform sends local times of UTC+8 without an offset (`yyyy-MM-ddTHH:mm:ss`). We store instants.
 * A space instead of `T` and a fractional second are tolerated; anything else is refused.
 */
const LOCAL_TIME = /^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?$/;
const PLATFORM_OFFSET_HOURS = 8;

/** Convert a platform local time (UTC+8) to an ISO-8601 UTC instant, or `undefined` if it is not a real time. */
export function platformTimeToIso(text: string): string | undefined {
  const m = LOCAL_TIME.exec(text);
  if (!m) return undefined;
  const [y, mo, d, h, mi, s] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  const ms = m[7] === undefined ? 0 : Math.floor(Number(`0.${m[7]}`) * 1000);
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || s > 59) return undefined;
  // Date.UTC rolls 31 February over into March; a real calendar date survives the round trip unchanged.
  const local = new Date(Date.UTC(y, mo - 1, d, h, mi, s, ms));
  if (local.getUTCFullYear() !== y || local.getUTCMonth() !== mo - 1 || local.getUTCDate() !== d) return undefined;
  return new Date(local.getTime() - PLATFORM_OFFSET_HOURS * 3600_000).toISOString();
}
