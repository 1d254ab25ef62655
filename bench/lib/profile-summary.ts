/**
 * Summarise a V8 `.cpuprofile` (node --cpu-prof): self time by function and by coarse category (RSA, JSON/schema,
 * HTTP/fastify, Redis/BullMQ, logging, GC, idle), so a report can say where the time goes.
 */
import { mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  /** Microseconds on the monotonic clock (the one `process.hrtime` reads, shared by every process on Linux). */
  startTime: number;
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

export interface ProfileSummary {
  /** How many processes' profiles were summed. */
  processes: number;
  totalMs: number;
  byCategory: { category: string; ms: number; share: number }[];
  topFunctions: { fn: string; ms: number; share: number }[];
}

function category(fn: string, url: string): string {
  if (fn === '(idle)') return 'idle';
  if (fn === '(garbage collector)') return 'gc';
  if (fn === '(program)') return 'program (native, outside JS)';
  if (/privateDecrypt|publicEncrypt/.test(fn) || url === 'node:internal/crypto/cipher') return 'rsa';
  if (url.startsWith('node:internal/crypto')) return 'crypto key handling';
  if (/^(writev|writeBuffer|writeString|writeUtf8String|writeLatin1String)$/.test(fn))
    return 'socket/fd writes (syscalls)';
  if (/bullmq|ioredis|redis-parser|msgpackr/.test(url)) return 'redis/bullmq';
  if (/pino|sonic-boom|thread-stream/.test(url)) return 'logging';
  if (/zod|lossless-json|re2js/.test(url) || (/JSON|parse/.test(fn) && /callback/.test(url)))
    return 'decode (json/schema)';
  if (/fastify|find-my-way|light-my-request|avvio/.test(url)) return 'fastify';
  if (/prom-client/.test(url)) return 'metrics';
  if (
    /node:(_http|http|net|stream|internal\/streams|_stream)|^node:internal\/(http|net|stream)/.test(url) ||
    /writev|writeBuffer|onStreamRead|readableAddChunk/.test(fn)
  ) {
    return 'node http/net';
  }
  if (/drizzle-orm/.test(url)) return 'drizzle';
  if (/node_modules\/(\.pnpm\/)?pg[@/-]|pg-protocol|pg-pool|pg-types/.test(url)) return 'pg client';
  if (/undici/.test(url)) return 'undici (Get order)';
  if (/apps\/(ingest|worker)|packages\/core/.test(url)) return 'our code';
  if (url.startsWith('node:')) return 'node internals';
  return url ? 'other js' : `native (${fn || 'anonymous'})`;
}

/** A span of the monotonic clock, in microseconds (`process.hrtime.bigint() / 1000n`). */
export interface ProfileWindow {
  fromUs: number;
  toUs: number;
}

/** Now on the clock V8's profiles use, in microseconds. */
export const monotonicUs = (): number => Number(process.hrtime.bigint() / 1000n);

/**
 * Self time summed over every profile in `files` (a cluster's primary and its workers each write one). With a
 * `window`, only the samples taken inside it: the measured run, without start-up (module loading) and shutdown.
 */
export function summarizeProfile(files: string[], window?: ProfileWindow, top = 12): ProfileSummary {
  const cats = new Map<string, number>();
  const fns = new Map<string, number>();
  let total = 0;
  for (const file of files) {
    const p = JSON.parse(readFileSync(file, 'utf8')) as Profile;
    const byId = new Map(p.nodes.map((n) => [n.id, n]));
    const self = new Map<number, number>();
    let at = p.startTime;
    for (let i = 0; i < p.samples.length; i++) {
      const id = p.samples[i]!;
      const delta = p.timeDeltas[i] ?? 0;
      at += delta;
      if (window && (at < window.fromUs || at > window.toUs)) continue;
      self.set(id, (self.get(id) ?? 0) + delta / 1000);
    }
    for (const [id, ms] of self) {
      const n = byId.get(id);
      if (!n) continue;
      total += ms;
      const { functionName, url, lineNumber } = n.callFrame;
      const c = category(functionName, url);
      cats.set(c, (cats.get(c) ?? 0) + ms);
      const short = url
        .replace(/^.*node_modules\/(\.pnpm\/[^/]+\/node_modules\/)?/, '')
        .replace(/^file:\/\/.*\/work\/main\//, '');
      const key = `${functionName || '(anonymous)'} ${short ? `${short}:${lineNumber + 1}` : ''}`.trim();
      fns.set(key, (fns.get(key) ?? 0) + ms);
    }
  }
  const sorted = (m: Map<string, number>) => [...m.entries()].sort((a, b) => b[1] - a[1]);
  return {
    processes: files.length,
    totalMs: total,
    byCategory: sorted(cats).map(([category, ms]) => ({ category, ms, share: ms / total })),
    topFunctions: sorted(fns)
      .slice(0, top)
      .map(([fn, ms]) => ({ fn, ms, share: ms / total })),
  };
}

/**
 * `--cpu-prof` into `dir`, and afterwards the summary of every profile written there since: the process's and, for a
 * cluster, each forked worker's (they inherit the flag). One file alone would be an idle supervisor.
 */
export function profileSession(dir: string): {
  nodeArgs: string[];
  collect: (window?: ProfileWindow) => ProfileSummary | undefined;
} {
  mkdirSync(dir, { recursive: true });
  const before = new Set(readdirSync(dir));
  return {
    nodeArgs: ['--cpu-prof', '--cpu-prof-dir', dir],
    collect(window) {
      const fresh = readdirSync(dir).filter((f) => f.endsWith('.cpuprofile') && !before.has(f));
      return fresh.length > 0
        ? summarizeProfile(
            fresh.map((f) => join(dir, f)),
            window,
          )
        : undefined;
    },
  };
}
