/**
 * The fleet's Get order budget as one Redis script: a reservation-style GCRA (generic cell rate algorithm). The
 * budget key keeps `tat`, the theoretical arrival time of the next request (µs, Redis's clock): a request may start
 * at `max(now, tat − tolerance)` and moves `tat` one interval (1 s / budget) on. A caller reserves up to `want`
 * start times at once (a lease), none further ahead than `horizon`, and starts its requests at them. The same call
 * marks the caller alive (the fleet's head count, for the fallback when Redis cannot be reached) and reads the shared
 * breaker state, so a busy process learns of an open breaker with no round trip of its own.
 *
 * All keys are the caller's, under the queue prefix (one hash tag, one slot on a cluster). Redis's TIME is used, not
 * the callers' clocks: hosts need not agree on the time. Losing the keys (a failover) costs one burst of
 * `tolerance` at most: a missing `tat` is "now". A `tat` further ahead than the script ever moves it
 * (`horizon + tolerance + interval` past now) was written under a faster clock (a failover to a replica whose clock
 * is behind, an NTP step back on the Redis host): it is clamped to that bound, so a clock costs at most one
 * interval's wait, never the difference.
 */

/** Keys: budget hash, alive sorted set, breaker string. */
export const RESERVE_KEYS = 3;

// ARGV: interval µs, tolerance µs, horizon µs, want, process id, alive window ms, keys' ttl ms.
// Reply: { retry µs (0 unless refused in part), processes alive, breaker open (0/1), throttled (0/1),
//          clamped (0/1), delay µs... }
// Large numbers are written with %.0f: Lua's tostring would round a µs timestamp to 14 digits.
export const RESERVE_LUA = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local horizon = tonumber(ARGV[3])
local want = tonumber(ARGV[4])
local ttl = ARGV[7]
local nowMs = math.floor(now / 1000)
redis.call('ZADD', KEYS[2], string.format('%.0f', nowMs), ARGV[5])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', string.format('%.0f', nowMs - tonumber(ARGV[6])))
redis.call('PEXPIRE', KEYS[2], ttl)
local reply = { 0, redis.call('ZCARD', KEYS[2]), redis.call('EXISTS', KEYS[3]), 0, 0 }
if want <= 0 or interval <= 0 then return reply end
local tat = tonumber(redis.call('HGET', KEYS[1], 'tat')) or now
local most = now + horizon + tolerance + interval
if tat > most then
  tat = most
  reply[5] = 1
end
if tat < now then tat = now end
local granted = 0
while granted < want do
  local s = tat - tolerance
  if s < now then s = now end
  if s - now > horizon then break end
  granted = granted + 1
  reply[5 + granted] = math.floor(s - now)
  tat = tat + interval
end
if granted < want then
  reply[1] = math.floor(tat - tolerance - now - horizon) + 1
  reply[4] = 1
  redis.call('HSET', KEYS[1], 'throttled', string.format('%.0f', nowMs))
end
if granted > 0 or reply[5] == 1 then redis.call('HSET', KEYS[1], 'tat', string.format('%.0f', tat)) end
redis.call('PEXPIRE', KEYS[1], ttl)
return reply
`;

/** The reply of {@link RESERVE_LUA}, decoded. */
export interface ReserveReply {
  /** How long to wait before asking again, in ms, when fewer than `want` start times were granted. */
  retryMs: number;
  /** Processes that used or heartbeat this budget within the alive window (this one included). */
  alive: number;
  /** The shared breaker state key exists. */
  breakerOpen: boolean;
  /** Fewer than `want` were granted: the fleet asks for more than the budget. */
  throttled: boolean;
  /** The budget's timestamp was further ahead than the script ever moves it (a clock stepped back) and was clamped. */
  clamped: boolean;
  /** Start times granted, as delays from now in ms (ascending). */
  delaysMs: number[];
}

export function decodeReserveReply(raw: unknown): ReserveReply {
  if (!Array.isArray(raw) || raw.length < 5)
    throw new Error(`fleet budget script: unexpected reply ${JSON.stringify(raw)?.slice(0, 80)}`);
  const n = raw.map(Number);
  return {
    retryMs: n[0]! / 1000,
    alive: n[1]!,
    breakerOpen: n[2] === 1,
    throttled: n[3] === 1,
    clamped: n[4] === 1,
    delaysMs: n.slice(5).map((us) => us / 1000),
  };
}
