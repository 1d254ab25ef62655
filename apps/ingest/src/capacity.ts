/**
 * How many connections one ingest process can hold: INGEST_MAX_CONNECTIONS=auto sizes it from what the machine
 * gives the process, not a fixed number. A connection costs one file descriptor and some memory; the cap keeps
 * both within bounds, so refusing an excess connection stays cheap and never turns into EMFILE or an OOM kill.
 */
import { readFileSync } from 'node:fs';
import { constrainedMemory } from 'node:process';
import { totalmem } from 'node:os';

/**
 * Memory one idle connection costs ingest (socket, HTTP parser, request state), measured with
 * `node bench/connection-memory.ts` (2,000 and 5,000 connections held in each slow state, RSS growth per connection):
 * 8-12 KiB silent, 10-12 KiB with partial headers, 18-26 KiB with complete headers and a partial body. The largest,
 * rounded up (docs/ingest.md).
 */
export const BYTES_PER_IDLE_CONNECTION = 32 * 1024;
/** File descriptors kept for everything else: Redis, the listeners, logs, key files, cluster IPC, DNS. */
export const RESERVED_FILES = 64;
/** Share of the memory available to ingest that idle connections may take (the rest: heap, RSA, batches). */
export const MEMORY_SHARE = 0.25;

/** The soft limit on open files of this process, from /proc/self/limits; undefined where it cannot be read. */
export function openFileLimit(
  limits: () => string = () => readFileSync('/proc/self/limits', 'utf8'),
): number | undefined {
  try {
    const line = limits()
      .split('\n')
      .find((l) => l.startsWith('Max open files'));
    const soft = line?.slice('Max open files'.length).trim().split(/\s+/)[0];
    if (soft === 'unlimited') return Number.MAX_SAFE_INTEGER;
    const n = Number(soft);
    return Number.isInteger(n) && n > 0 ? n : undefined;
  } catch {
    return undefined;
  }
}

/** Bytes of memory this process may use: the cgroup limit when there is one below the machine's memory. */
export function availableMemory(): number {
  const constrained = constrainedMemory();
  const total = totalmem();
  return constrained > 0 && constrained < total ? constrained : total;
}

/** The cap and the figures it came from (logged at start). */
export interface ConnectionCapacity {
  maxConnections: number;
  /** What set it: the configured number, the open-file limit, or memory. */
  limitedBy: 'configured' | 'open files' | 'memory';
  openFileLimit: number | undefined;
  /** Connections the open-file limit leaves room for (limit − reserved). */
  byOpenFiles: number | undefined;
  /** Connections the memory share of this process leaves room for. */
  byMemory: number;
  /** Problem with a configured number (above what the open-file limit allows), for a warning at start. */
  warning?: string;
}

/**
 * Size the cap: with `auto`, the smaller of (open-file limit − {@link RESERVED_FILES}) and ({@link MEMORY_SHARE} of
 * the memory available, split over the ingest processes of this host, ÷ {@link BYTES_PER_IDLE_CONNECTION}). When
 * the open-file limit cannot be read (not Linux) it falls back to 1,024 − reserved, Node's most common soft limit.
 */
export function connectionCapacity(
  configured: number | 'auto',
  opts: { processes: number; openFiles?: number | undefined; memoryBytes?: number },
): ConnectionCapacity {
  const files = 'openFiles' in opts ? opts.openFiles : openFileLimit();
  const byOpenFiles = files === undefined ? undefined : Math.max(1, files - RESERVED_FILES);
  const memory = opts.memoryBytes ?? availableMemory();
  const byMemory = Math.max(
    1,
    Math.floor((memory * MEMORY_SHARE) / Math.max(1, opts.processes) / BYTES_PER_IDLE_CONNECTION),
  );
  const base = { openFileLimit: files, byOpenFiles, byMemory };
  if (configured !== 'auto') {
    const warning =
      byOpenFiles !== undefined && configured > byOpenFiles
        ? `INGEST_MAX_CONNECTIONS=${configured} is above what the open-file limit (${files}) leaves for connections ` +
          `(${byOpenFiles}): accepts will fail with EMFILE before the cap; raise the limit (ulimit -n, LimitNOFILE) ` +
          'or use auto'
        : undefined;
    return { ...base, maxConnections: configured, limitedBy: 'configured', ...(warning ? { warning } : {}) };
  }
  const fileRoom = byOpenFiles ?? 1024 - RESERVED_FILES;
  return fileRoom <= byMemory
    ? { ...base, maxConnections: fileRoom, limitedBy: 'open files' }
    : { ...base, maxConnections: byMemory, limitedBy: 'memory' };
}
