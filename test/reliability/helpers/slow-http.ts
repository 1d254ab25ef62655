/**
 * Debian's `slowhttptest` (a tool nobody here wrote) as an attacker, a genuine sender bound to another loopback
 * address, and a reader of an ingest process's Prometheus text. Linux treats all of 127.0.0.0/8 as loopback, so
 * 127.0.0.1 and 127.0.0.2 are two source addresses on one machine.
 */
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import { performance } from 'node:perf_hooks';
import { killQuietly, onProcessExit } from '@mcb/testkit';

export type SlowMode = 'slowloris' | 'slow body' | 'slow read';

const MODE_FLAGS: Record<SlowMode, string[]> = {
  // Partial headers, then one more random header line per interval.
  slowloris: ['-H', '-t', 'POST', '-x', '24'],
  // Complete headers announcing a 4 KB JSON body (our body limit), then a few bytes of it per interval.
  'slow body': ['-B', '-s', '4096', '-f', 'application/json', '-x', '24'],
  // Whole requests, three per connection, the replies read a few bytes at a time through a tiny TCP window.
  'slow read': ['-X', '-k', '3', '-n', '1', '-w', '1', '-y', '64', '-z', '4'],
};

/** Whether slowhttptest is installed (`.ci/run` installs it on Debian). */
export function hasSlowHttpTest(): boolean {
  return spawnSync('slowhttptest', ['-h'], { stdio: 'ignore' }).error === undefined;
}

/** The soft open-file limit of a process (`self` or a pid), from /proc. */
export function openFileLimitOf(pid: number | 'self'): number {
  const line = readFileSync(`/proc/${pid}/limits`, 'utf8')
    .split('\n')
    .find((l) => l.startsWith('Max open files'));
  const soft = line?.slice('Max open files'.length).trim().split(/\s+/)[0];
  return soft === 'unlimited' ? Number.MAX_SAFE_INTEGER : Number(soft);
}

/** slowhttptest's own final count of its connections, from the last status block it printed. */
export interface SlowReport {
  connected: number;
  closed: number;
  error: number;
  pending: number;
  output: string;
}

/**
 * Run slowhttptest in `mode` with `connections` connections opened at `rate` per second for `seconds`, against
 * `url`. Resolves when it exits (it stops itself at `seconds`; killed 15 s later if it has not).
 */
export function runSlowHttpTest(
  mode: SlowMode,
  opts: { url: string; connections: number; rate: number; seconds: number },
): Promise<SlowReport> {
  const args = [
    ...MODE_FLAGS[mode],
    '-c',
    String(opts.connections),
    '-r',
    String(opts.rate),
    '-l',
    String(opts.seconds),
    '-i',
    '1',
    '-p',
    '2',
    '-u',
    opts.url,
  ];
  const child = spawn('slowhttptest', args, { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  const pid = child.pid!;
  const unregister = onProcessExit(() => killQuietly(pid, true));
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output = (output + d.toString('latin1')).slice(-20_000)));
  child.stderr.on('data', (d: Buffer) => (output = (output + d.toString('latin1')).slice(-20_000)));
  const guard = setTimeout(() => killQuietly(pid, true), (opts.seconds + 15) * 1000);
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    // 'close', not 'exit': the counts it prints last may still be in the pipe when it exits.
    child.once('close', () => {
      clearTimeout(guard);
      unregister();
      // eslint-disable-next-line no-control-regex
      const plain = output.replace(/\x1b\[[0-9;]*m/g, '');
      const last = (name: string) =>
        Number([...plain.matchAll(new RegExp(`${name}:\\s+(\\d+)`, 'g'))].at(-1)?.[1] ?? NaN);
      resolve({
        connected: last('connected'),
        closed: last('closed'),
        error: last('error'),
        pending: last('pending'),
        output: plain,
      });
    });
  });
}

/** One genuine callback's outcome: status and body of the reply (0 and the error when none), and how long it took. */
export interface Sent {
  status: number;
  text: string;
  ms: number;
}

/** POST `body` to `/callbacks` on a new connection from `localAddress`, as the platform would from its own address. */
export function postFrom(localAddress: string, port: number, body: string): Promise<Sent> {
  const started = performance.now();
  return new Promise((resolve) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path: '/callbacks',
        method: 'POST',
        localAddress,
        agent: false,
        timeout: 10_000,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text, ms: performance.now() - started }));
        res.on('error', (e) => resolve({ status: 0, text: e.message, ms: performance.now() - started }));
      },
    );
    req.on('timeout', () => req.destroy(new Error('no reply within 10 s')));
    req.on('error', (e) => resolve({ status: 0, text: e.message, ms: performance.now() - started }));
    req.end(body);
  });
}

/** Read from ingest's /metrics body (shared with the bench). */
export { metricValue } from '@mcb/core/metrics';

/** The p-th percentile (0-100) of `values`, nearest rank. */
export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.max(0, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;
}
