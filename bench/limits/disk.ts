/**
 * Limit: how long this disk takes to make a small append durable (`fdatasync`), back to back for a few seconds, in
 * the directory the benchmark's redis-server writes its AOF to. With `appendfsync always` Redis fsyncs before it
 * answers, so every acknowledged callback waits for one of these; a slow one holds every request of its moment,
 * whatever ingest does. Its tail is what the ingest latency at half of peak can be no better than.
 */
import { closeSync, fdatasyncSync, openSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { summarize, type LatencySummary } from '../lib/stats.ts';

export interface DiskLimit {
  /** fdatasync latency of a 2 KiB append (ms). */
  fdatasyncMs: LatencySummary;
  /** Syncs that took 20 ms or more (the ingest tail target). */
  over20ms: number;
  syncs: number;
}

export function measureDisk(opts: { dir: string; seconds: number }): DiskLimit {
  const file = join(opts.dir, 'bench-disk-limit.dat');
  const fd = openSync(file, 'a');
  const block = Buffer.alloc(2048, 0x78); // about one batch of callback jobs in the AOF
  const latencies: number[] = [];
  try {
    const stopAt = performance.now() + opts.seconds * 1000;
    while (performance.now() < stopAt) {
      writeSync(fd, block);
      const t = performance.now();
      fdatasyncSync(fd);
      latencies.push(performance.now() - t);
    }
  } finally {
    closeSync(fd);
    rmSync(file, { force: true });
  }
  return {
    fdatasyncMs: summarize(latencies),
    over20ms: latencies.filter((ms) => ms >= 20).length,
    syncs: latencies.length,
  };
}
