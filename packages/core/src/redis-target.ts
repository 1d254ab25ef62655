/**
 * Which Redis every process talks to, from one place in the config: a single node (`REDIS_URL`), a primary found
 * through Redis Sentinel (`REDIS_SENTINELS` + `REDIS_SENTINEL_NAME`; ioredis follows a failover without a restart),
 * or a Redis Cluster (`REDIS_CLUSTER_NODES`, seed nodes; the prefix's hash tag keeps a queue in one slot).
 * Exactly one of the three is configured; `loadConfig` refuses anything else, naming the variables.
 */
export type RedisTarget =
  | {
      kind: 'single';
      url: string;
      /** TLS options beyond what `rediss://` turns on (a private CA). */
      tls?: RedisTls;
    }
  | {
      kind: 'sentinel';
      sentinels: { host: string; port: number }[];
      /** The master group name the sentinels monitor. */
      name: string;
      /** Password of the data nodes (REDIS_PASSWORD). */
      password?: string;
      /** Password of the sentinels themselves (REDIS_SENTINEL_PASSWORD). */
      sentinelPassword?: string;
      /** TLS to the sentinels and the data nodes (REDIS_TLS). */
      tls?: RedisTls;
    }
  | {
      kind: 'cluster';
      /** Seed nodes; ioredis learns the rest of the cluster from them. */
      nodes: { host: string; port: number }[];
      /** Password of the data nodes (REDIS_PASSWORD). */
      password?: string;
      /** TLS to every node (REDIS_TLS). */
      tls?: RedisTls;
    };

/** TLS towards Redis: Node's `tls.connect` options; `ca` from REDIS_TLS_CA_FILE, else Node's public CAs. */
export interface RedisTls {
  ca?: string;
}

/** `host:port[,host:port...]` → addresses; undefined with a reason when malformed. */
export function parseRedisNodes(text: string): { host: string; port: number }[] | string {
  const nodes: { host: string; port: number }[] = [];
  for (const part of text
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean)) {
    const m = /^(\[[^\]]+\]|[^:]+):(\d{1,5})$/.exec(part);
    const port = m ? Number(m[2]) : NaN;
    if (!m || port < 1 || port > 65_535) return `expected host:port[,host:port...] (got "${part.slice(0, 60)}")`;
    nodes.push({ host: m[1]!.replace(/^\[|\]$/g, ''), port });
  }
  return nodes.length > 0 ? nodes : 'expected at least one host:port';
}

/** The target as a log line: where, never a password. */
export function describeRedisTarget(target: RedisTarget): string {
  if (target.kind === 'single') {
    const u = new URL(target.url);
    return `${u.protocol}//${u.host}${u.pathname === '/' ? '' : u.pathname}`;
  }
  if (target.kind === 'cluster')
    return `${target.tls ? 'TLS ' : ''}cluster via ${target.nodes.map((s) => `${s.host}:${s.port}`).join(',')}`;
  return `${target.tls ? 'TLS ' : ''}sentinel master "${target.name}" via ${target.sentinels.map((s) => `${s.host}:${s.port}`).join(',')}`;
}
