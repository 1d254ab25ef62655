import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { afterEach, describe, expect, it } from 'vitest';
import { hasEnv, leftListening, listenersOn } from './helpers/process-scan.ts';

// The demo's tests run beside others (vitest.config.ts, PAIRED): after a run, a port it used may already be a
// neighbour's. The check they use must still catch a process of the run left listening, and only that.
const MARK = 'MCB_PORT_SCAN_TEST';
const started: ChildProcess[] = [];
afterEach(() => {
  for (const child of started.splice(0)) child.kill('SIGKILL');
});

/** A process listening on a free port of 127.0.0.1, with `env` added to ours; its port. */
async function listener(env: Record<string, string>): Promise<{ pid: number; port: number }> {
  const child = spawn(
    process.execPath,
    ['-e', "require('net').createServer().listen(0, '127.0.0.1', function () { console.log(this.address().port) })"],
    { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  started.push(child);
  const [chunk] = (await once(child.stdout!, 'data')) as [Buffer];
  return { pid: child.pid!, port: Number(String(chunk).trim()) };
}

describe('a port left listening after a run', () => {
  it("is reported when a process of the run holds it, and not when a neighbour's does", async () => {
    const mark = randomBytes(6).toString('hex');
    const isRuns = (p: { pid: number }) => hasEnv(p.pid, MARK, mark);
    const ours = await listener({ [MARK]: mark });
    const neighbour = await listener({ [MARK]: 'another-run' });

    expect(listenersOn(ours.port)?.map((p) => p.pid)).toEqual([ours.pid]);
    expect(leftListening(ours.port, isRuns)).toEqual([
      expect.stringMatching(new RegExp(`^port ${ours.port}: ${ours.pid} `)),
    ]);
    expect(leftListening(neighbour.port, isRuns)).toEqual([]);

    // Once it is gone, its port is free: nothing left.
    const child = started.find((c) => c.pid === ours.pid)!;
    child.kill('SIGKILL');
    await once(child, 'exit');
    expect(listenersOn(ours.port)).toEqual([]);
    expect(leftListening(ours.port, isRuns)).toEqual([]);
  });
});
