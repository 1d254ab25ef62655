/**
 * Redis for BullMQ: exactly one topology (a single node, Sentinel or Cluster), its TLS and passwords, and the key
 * prefix. Every process reads it (packages/core/src/redis-target.ts turns it into a connection target).
 */
import { z } from 'zod';
import { parseRedisNodes } from '../redis-target.ts';
import { bool, optionalString, url, type ValuesOf } from './fields.ts';

/** The redis area of the config schema (composed in index.ts). */
export const redisFields = {
  /** Redis for BullMQ (empty counts as unset: a compose env file empties it to choose another topology). */
  REDIS_URL: optionalString.pipe(url(['redis:', 'rediss:'], 'redis').default('redis://127.0.0.1:6379')),
  /**
   * Redis through Sentinel instead of REDIS_URL: the sentinels as `host:port[,host:port...]`, with
   * REDIS_SENTINEL_NAME; every process finds the primary through them and follows a failover without a restart.
   */
  REDIS_SENTINELS: optionalString,
  /** The master group name the sentinels monitor (with REDIS_SENTINELS). */
  REDIS_SENTINEL_NAME: optionalString,
  /**
   * Redis Cluster instead of REDIS_URL: seed nodes as `host:port[,host:port...]` (ioredis finds the others). Every key
   * of ours lives in one slot, so QUEUE_PREFIX must hold a hash tag such as `{mcb}`.
   */
  REDIS_CLUSTER_NODES: optionalString,
  /**
   * Password of the Redis data nodes behind REDIS_SENTINELS or REDIS_CLUSTER_NODES (with REDIS_URL it goes in the
   * URL).
   */
  REDIS_PASSWORD: optionalString,
  /** Password the sentinels themselves ask for (Redis `requirepass` on the sentinels), with REDIS_SENTINELS. */
  REDIS_SENTINEL_PASSWORD: optionalString,
  /**
   * TLS to the sentinels and the data nodes of REDIS_SENTINELS, or to the nodes of REDIS_CLUSTER_NODES. With REDIS_URL
   * write `rediss://` instead (this setting is then refused, so one connection cannot be half-configured).
   */
  REDIS_TLS: bool(false),
  /**
   * PEM file of the CA(s) that sign the Redis servers' certificates (a private CA), for `rediss://` or REDIS_TLS.
   * @defaultValue Node's bundled public CAs
   */
  REDIS_TLS_CA_FILE: optionalString,
  /** BullMQ key prefix; on Redis Cluster it must hold a hash tag such as `{mcb}`. */
  QUEUE_PREFIX: z.string().min(1).default('mcb'),
};

/** The hash tag of a key prefix (`{mcb}` in `{mcb}` or `x{mcb}y`), as Redis Cluster reads it; undefined without one. */
export function hashTagOf(prefix: string): string | undefined {
  const open = prefix.indexOf('{');
  if (open < 0) return undefined;
  const close = prefix.indexOf('}', open + 1);
  return close > open + 1 ? prefix.slice(open + 1, close) : undefined;
}

/**
 * Exactly one Redis topology: REDIS_URL (the default), REDIS_SENTINELS with REDIS_SENTINEL_NAME, or
 * REDIS_CLUSTER_NODES (with a hash tag in QUEUE_PREFIX, so that every key of a queue lands in one slot).
 */
export function redisTopologyProblems(
  values: ValuesOf<typeof redisFields>,
  env: Record<string, string | undefined>,
): string[] {
  const problems: string[] = [];
  const chosen = [
    env.REDIS_URL?.trim() ? 'REDIS_URL' : undefined,
    values.REDIS_SENTINELS !== undefined ? 'REDIS_SENTINELS' : undefined,
    values.REDIS_CLUSTER_NODES !== undefined ? 'REDIS_CLUSTER_NODES' : undefined,
  ].filter((v): v is string => v !== undefined);
  if (chosen.length > 1)
    problems.push(
      `${chosen.join(', ')}: set exactly one Redis topology ` +
        `(REDIS_URL, REDIS_SENTINELS or REDIS_CLUSTER_NODES), not ${chosen.length}`,
    );
  if (values.REDIS_SENTINELS !== undefined) {
    const nodes = parseRedisNodes(values.REDIS_SENTINELS);
    if (typeof nodes === 'string') problems.push(`REDIS_SENTINELS: ${nodes}`);
    if (values.REDIS_SENTINEL_NAME === undefined)
      problems.push('REDIS_SENTINEL_NAME: required with REDIS_SENTINELS (the master group name) (unset)');
  } else if (values.REDIS_SENTINEL_NAME !== undefined) {
    problems.push('REDIS_SENTINEL_NAME: only with REDIS_SENTINELS (unset)');
  }
  if (values.REDIS_SENTINEL_PASSWORD !== undefined && values.REDIS_SENTINELS === undefined) {
    problems.push('REDIS_SENTINEL_PASSWORD: only with REDIS_SENTINELS (unset)');
  }
  if (values.REDIS_TLS && values.REDIS_SENTINELS === undefined && values.REDIS_CLUSTER_NODES === undefined) {
    problems.push(
      'REDIS_TLS: only with REDIS_SENTINELS or REDIS_CLUSTER_NODES; for a single node write a rediss:// REDIS_URL',
    );
  }
  if (
    values.REDIS_TLS_CA_FILE !== undefined &&
    !values.REDIS_TLS &&
    !(
      values.REDIS_SENTINELS === undefined &&
      values.REDIS_CLUSTER_NODES === undefined &&
      values.REDIS_URL.startsWith('rediss:')
    )
  ) {
    problems.push('REDIS_TLS_CA_FILE: only with TLS to Redis (a rediss:// REDIS_URL, or REDIS_TLS=true)');
  }
  if (values.REDIS_CLUSTER_NODES !== undefined) {
    const nodes = parseRedisNodes(values.REDIS_CLUSTER_NODES);
    if (typeof nodes === 'string') problems.push(`REDIS_CLUSTER_NODES: ${nodes}`);
    if (hashTagOf(values.QUEUE_PREFIX) === undefined) {
      problems.push(
        `QUEUE_PREFIX: must hold a hash tag such as {mcb} with REDIS_CLUSTER_NODES, so that every key of a queue ` +
          `is in one slot (BullMQ's scripts touch several keys at once) ` +
          `(got ${JSON.stringify(values.QUEUE_PREFIX.slice(0, 60))})`,
      );
    }
  }
  return problems;
}
