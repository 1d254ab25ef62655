import { Redis } from 'ioredis';
import { infoField, type RedisTarget } from '@mcb/core/redis';

/**
 * A check that the node a batch was written to is still the primary, asked of the sentinels after the batch's WAIT.
 *
 * Why: a primary that was cut off or paused while the sentinels promoted a replica comes back still believing it is
 * the primary. Ingest connections it still holds write to it, and a replica that has not been moved yet can even
 * answer `WAIT 1` for it; moments later the sentinels demote it and those writes are gone. Acknowledging a batch only
 * when every sentinel that answers (a majority at least) names, as the healthy primary, the very node (by run id) the
 * batch was written to closes that window: the stale primary's writes answer `503 fail`, and the platform retries
 * them on the new one.
 */
export interface PrimaryFence {
  /**
   * Call before a batch's first write. The returned check, called once the batch is durable (after WAITAOF and
   * WAIT), resolves when every sentinel that answers, and at least a majority, names the node written to as the
   * healthy primary, and throws otherwise: a sentinel names another node, or sees the primary down or failing over,
   * the connection moved to another node in between, or too few sentinels answered in time.
   */
  begin(): () => Promise<void>;
  /** Disconnect from the sentinels. */
  close(): void;
}

/** Options of {@link createSentinelFence}. */
export interface SentinelFenceOptions {
  /** Upper bound of one question to a sentinel, in ms. @defaultValue 1000 */
  timeoutMs?: number;
  /** Name shown by CLIENT LIST on the sentinels. @defaultValue ingest-fence */
  connectionName?: string;
}

/** `SENTINEL MASTER <name>`'s flat field/value list as an object. */
function fieldsOf(reply: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (!Array.isArray(reply)) return out;
  for (let i = 0; i + 1 < reply.length; i += 2) out[String(reply[i])] = String(reply[i + 1]);
  return out;
}

type SentinelTarget = Extract<RedisTarget, { kind: 'sentinel' }>;

/**
 * A fence for a connection made through Redis Sentinel (`target.kind === 'sentinel'`). The node's run id is read once
 * per connection (`INFO server`, again after each reconnect); each check asks every sentinel `SENTINEL MASTER` in
 * parallel and waits for all of their answers (a sentinel whose connection is down is not waited for).
 */
export function createSentinelFence(
  redis: Redis,
  target: SentinelTarget,
  options: SentinelFenceOptions = {},
): PrimaryFence {
  // Each (re)connection is a new generation: a batch whose connection changed between its writes and its check may
  // have written to a node other than the one the check would ask about.
  let generation = 0;
  let known: { generation: number; runId: string } | undefined;
  const onReady = () => {
    generation++;
    known = undefined;
  };
  redis.on('ready', onReady);
  if (redis.status === 'ready') generation = 1;
  const sentinels = connectSentinels(target, options);

  async function runIdFor(gen: number): Promise<string> {
    if (known?.generation === gen) return known.runId;
    const runId = infoField(String(await redis.info('server')), 'run_id');
    if (!runId) throw new Error('fence: INFO server named no run_id');
    if (generation !== gen) throw new Error('fence: the connection moved to another node during the batch');
    known = { generation: gen, runId };
    return runId;
  }

  return {
    begin() {
      const gen = generation;
      return async () => {
        if (generation !== gen) throw new Error('fence: the connection moved to another node during the batch');
        await askSentinels(sentinels, target.name, await runIdFor(gen));
      };
    },
    close() {
      redis.off('ready', onReady);
      for (const s of sentinels) s.disconnect();
    },
  };
}

/** One connection to each sentinel, each question bounded by `timeoutMs`. */
function connectSentinels(target: SentinelTarget, options: SentinelFenceOptions): Redis[] {
  const timeoutMs = options.timeoutMs ?? 1000;
  const sentinels = target.sentinels.map(
    (s) =>
      new Redis({
        host: s.host,
        port: s.port,
        connectionName: options.connectionName ?? 'ingest-fence',
        ...(target.sentinelPassword ? { password: target.sentinelPassword } : {}),
        ...(target.tls ? { tls: target.tls } : {}),
        connectTimeout: timeoutMs,
        commandTimeout: timeoutMs,
        maxRetriesPerRequest: 1,
        retryStrategy: (times) => Math.min(100 * times, 2000),
      }),
  );
  // A sentinel that is down is simply one that does not agree; its errors are not the enqueue's to log.
  for (const s of sentinels) s.on('error', () => {});
  return sentinels;
}

/**
 * Resolves when every sentinel that answers names `runId` as the healthy primary of `name` and they are a majority;
 * rejects as soon as one names anything else, and when too few answer. Unanimity, not a majority: right after a
 * failover only its leader knows the new primary (the others learn it from the leader's hello messages, up to 2 s
 * later) and a resumed old primary looks healthy again to them at once; the fault run lost 8 acknowledged callbacks
 * that way with a majority rule.
 */
function askSentinels(sentinels: readonly Redis[], name: string, runId: string): Promise<void> {
  const majority = Math.floor(sentinels.length / 2) + 1;
  return new Promise<void>((resolve, reject) => {
    let agree = 0;
    let settled = 0;
    let failed = false;
    const named: string[] = [];
    const refuse = (why: string) => {
      if (failed) return;
      failed = true;
      reject(new Error(`fence: ${why} (node written to: run id ${runId.slice(0, 8)}; ${named.join('; ')})`));
    };
    const settle = () => {
      if (failed || ++settled < sentinels.length) return;
      if (agree >= majority) resolve();
      else refuse(`${agree} of ${sentinels.length} sentinel(s) answered; a majority (${majority}) must`);
    };
    for (const s of sentinels) {
      // A sentinel whose connection is known broken is not waited for: it does not answer.
      if (s.status === 'reconnecting' || s.status === 'close' || s.status === 'end') {
        named.push(`${s.options.host}:${s.options.port} not connected`);
        settle();
        continue;
      }
      s.call('SENTINEL', 'MASTER', name).then(
        (reply) => {
          const m = fieldsOf(reply);
          // Exactly `master`: not s_down, o_down or failover_in_progress, when a write may be about to be dropped.
          if (m.runid === runId && m.flags === 'master') {
            agree++;
            settle();
          } else {
            named.push(describeMaster(m));
            refuse('a sentinel does not name the node written to as the healthy primary');
          }
        },
        (e: unknown) => {
          named.push(`${s.options.host}:${s.options.port} no answer (${e instanceof Error ? e.message : String(e)})`);
          settle();
        },
      );
    }
  });
}

/** What a sentinel named instead: address, run id, flags. */
function describeMaster(m: Record<string, string>): string {
  const runId = (m.runid ?? '').slice(0, 8) || 'no run id';
  return `a sentinel names ${m.ip ?? '?'}:${m.port ?? '?'} ${runId} ${m.flags ?? ''}`.trim();
}
