import type { Cluster, Redis } from 'ioredis';

/** A connection from {@link createRedis}: one node (single or through Sentinel) or a Redis Cluster. */
export type RedisClient = Redis | Cluster;

/** Whether `client` talks to a Redis Cluster. */
export function isCluster(client: RedisClient): client is Cluster {
  return (client as Cluster).isCluster === true;
}

/**
 * The data nodes behind `client`, to inspect one by one (settings, memory, replicas): the masters of a cluster, or
 * the connection itself. A cluster's list is known once it is ready.
 */
export function dataNodesOf(client: RedisClient): Redis[] {
  return isCluster(client) ? client.nodes('master') : [client];
}

/** `host:port` of a node, for messages (no password). */
export function nodeAddressOf(node: Redis): string {
  return `${node.options.host ?? '127.0.0.1'}:${node.options.port ?? 6379}`;
}
