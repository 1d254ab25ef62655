/**
 * Where one ingest process spends its CPU under one load, measured with Linux `perf` (sampling the process's main
 * thread on the CPU, native frames included), not V8's `--cpu-prof`: V8's profiler counts native work outside
 * JavaScript (HTTP parsing in C++, socket syscalls) as "(idle)", and its own sampling doubles ingest's cost per
 * request at low load. perf adds about 5 %.
 *
 *   node bench/ingest-perf.ts [--connections 64 | --rate 1000] [--seconds 8] [--no-perf] [--top 40]
 *
 * `--connections N`: closed loop on N keep-alive connections (64: the bench's peak step). `--rate R`: open loop at R
 * req/s (the bench's half-peak run). Prints req/s, the main thread's CPU per request, latency, and the share of the
 * main thread's samples under each frame (inclusive, whatever the JIT tier), grouped as below. Needs `perf` (Debian:
 * linux-perf) and the right to attach to the process (root, or kernel.perf_event_paranoid <= 1); without it, or with
 * `--no-perf`, it prints the figures without the breakdown.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { createKeys, prepareCallbacks } from './lib/callbacks.ts';
import { startIngest } from './lib/ingest-process.ts';
import { closedLoop, openLoop } from './lib/load.ts';
import { cpuSecondsOf } from './lib/proc.ts';
import { startRedis } from './lib/redis-server.ts';
import { summarize } from './lib/stats.ts';

const { values: a } = parseArgs({
  options: {
    connections: { type: 'string' },
    rate: { type: 'string' },
    seconds: { type: 'string', default: '8' },
    'no-perf': { type: 'boolean', default: false },
    top: { type: 'string', default: '40' },
  },
});
if (a.connections !== undefined && a.rate !== undefined) throw new Error('give --connections or --rate, not both');
const seconds = Number(a.seconds);
const load: { rate: number } | { connections: number } =
  a.rate !== undefined ? { rate: Number(a.rate) } : { connections: Number(a.connections ?? 64) };
if (!(seconds > 0) || Object.values(load).some((n) => !(n > 0)))
  throw new Error('--seconds, --connections and --rate take positive numbers');

const perfOk = !a['no-perf'] && spawnSync('perf', ['--version'], { stdio: 'ignore' }).status === 0;
if (!a['no-perf'] && !perfOk) console.error('perf not found (Debian: apt-get install linux-perf): figures only');

/** Groups of frames, matched on the tier-free frame name; a sample counts once per group it falls under. */
const GROUPS: Array<[string, RegExp]> = [
  ['RSA private decrypt (OpenSSL)', /^node::crypto::PublicKeyCipher::Cipher<\(/],
  ["Node's per-call key checks (prepareAsymmetricKey)", /^JS:prepareAsymmetricKey /],
  ['record decode around RSA (decodeCallbackDetailed)', /^JS:decodeCallbackDetailed /],
  ['  of which the record parse and schema (parseRecord)', /^JS:parseRecord /],
  ['the Redis transaction (addAndReadBack)', /^JS:addAndReadBack /],
  ["  of which ioredis's MULTI object (Pipeline constructor)", /^JS:Pipeline ioredis\/built\/Pipeline\.js$/],
  ['  of which its write (Pipeline.exec)', /^JS:Pipeline\.exec /],
  ['HTTP request parse (llhttp)', /^llhttp__internal_execute$/],
  ['the reply (fastify Reply.send)', /^JS:Reply\.send /],
  ['syscalls (socket reads and writes)', /^do_syscall_64$/],
  ['garbage collection', /^v8::internal::(Heap::CollectGarbage|Scavenger::|MarkCompactCollector::)/],
];

function frameName(line: string): string {
  return line
    .trim()
    .replace(/^[0-9a-f]+ /, '')
    .replace(/^JS:[*+~^']+/, 'JS:')
    .replace(/[^ ]*\/node_modules\/\.pnpm\/[^/]+\/node_modules\//, '')
    .replace(/file:\/\/[^ ]*?\/(apps|packages)\//, '$1/')
    .replace(/:\d+(:\d+)?$/, '');
}

function breakdown(data: string, top: number): void {
  const out = spawnSync('perf', ['script', '-i', data, '-F', 'ip,sym'], {
    encoding: 'utf8',
    maxBuffer: 1 << 30,
  }).stdout;
  const inclusive = new Map<string, number>();
  const groups = new Map<string, number>();
  let samples = 0;
  for (const block of out.split('\n\n')) {
    const frames = block
      .split('\n')
      .filter((l) => l.trim())
      .map(frameName);
    if (frames.length === 0) continue;
    samples++;
    const unique = new Set(frames);
    for (const f of unique) inclusive.set(f, (inclusive.get(f) ?? 0) + 1);
    for (const [label, re] of GROUPS)
      if ([...unique].some((f) => re.test(f))) groups.set(label, (groups.get(label) ?? 0) + 1);
  }
  const pct = (n: number) => `${((100 * n) / samples).toFixed(1).padStart(5)} %`;
  console.log(`\nmain thread, ${samples} samples on the CPU; share of samples under each frame (inclusive):`);
  for (const [label] of GROUPS) console.log(`  ${pct(groups.get(label) ?? 0)}  ${label}`);
  console.log(`\ntop ${top} JavaScript frames (inclusive):`);
  [...inclusive]
    .filter(([f]) => f.startsWith('JS:'))
    .sort((x, y) => y[1] - x[1])
    .slice(0, top)
    .forEach(([f, n]) => console.log(`  ${pct(n)}  ${f.slice(3, 150)}`));
}

const keys = createKeys(2048);
const redis = await startRedis();
const work = mkdtempSync(join(tmpdir(), 'mcb-ingest-perf-'));
let ingestPid: number | undefined;
try {
  const ingest = await startIngest({
    redisUrl: redis.url,
    privateKeyFile: keys.privateKeyFile,
    workers: 1,
    logLevel: 'info',
    nodeArgs: perfOk ? ['--perf-basic-prof'] : [],
  });
  try {
    const target = { host: ingest.host, port: ingest.port };
    const pid = ingest.child.pid;
    ingestPid = pid;
    const warm = prepareCallbacks({ count: 8000, publicKeyPem: keys.publicKeyPem, ...target });
    await closedLoop({ ...target, connections: 4, durationMs: 2000, next: warm.next });
    const prepared = prepareCallbacks({
      count: Math.ceil(('rate' in load ? load.rate : 4000) * seconds * 1.3) + 500,
      publicKeyPem: keys.publicKeyPem,
      ...target,
    });
    const data = join(work, 'perf.data');
    // The main thread's id is the process's; perf follows that thread only (V8's helpers are not ingest's work).
    const recorder = perfOk
      ? spawn('perf', ['record', '-F', '1999', '-g', '-t', String(pid), '-o', data, '--', 'sleep', String(seconds)], {
          stdio: 'ignore',
        })
      : undefined;
    const cpu0 = cpuSecondsOf(pid, pid);
    const r =
      'rate' in load
        ? await openLoop({
            ...target,
            rate: load.rate,
            durationMs: seconds * 1000,
            maxConnections: 256,
            next: prepared.next,
          })
        : await closedLoop({
            ...target,
            connections: load.connections,
            durationMs: seconds * 1000,
            next: prepared.next,
          });
    const cpu = (cpuSecondsOf(pid, pid) - cpu0) / r.seconds;
    if (recorder) await new Promise((resolve) => recorder.once('exit', resolve));
    const lat = summarize(r.latencies);
    const what = 'rate' in load ? `open loop at ${load.rate} req/s` : `closed loop, ${load.connections} connections`;
    console.log(
      `${what}: ${r.rps.toFixed(0)} req/s, main thread ${cpu.toFixed(2)} of a core = ${((cpu / r.rps) * 1000).toFixed(3)} ms per request, ` +
        `p50 ${lat.p50.toFixed(1)} ms, p99 ${lat.p99.toFixed(1)} ms${perfOk ? ' (perf attached)' : ''}`,
    );
    if (recorder) breakdown(data, Number(a.top));
  } finally {
    await ingest.child.stop();
  }
} finally {
  await redis.close();
  keys.remove();
  // --perf-basic-prof writes /tmp/perf-<pid>.map for perf's symbols; of no use after the run.
  if (ingestPid !== undefined) rmSync(`/tmp/perf-${ingestPid}.map`, { force: true });
  rmSync(work, { recursive: true, force: true });
}
