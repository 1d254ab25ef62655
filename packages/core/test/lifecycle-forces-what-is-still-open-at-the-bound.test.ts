import { createReleasers, forceBudgetMs } from '@mcb/core/lifecycle';
import { createLogger } from '@mcb/core/logger';
import { lineSink } from '@mcb/testkit';
import { describe, expect, it } from 'vitest';

describe('createReleasers with a bound', () => {
  it('forces what is still open when the bound is reached, says which, and exits 1', async () => {
    const sink = lineSink();
    const logger = createLogger({ name: 't', destination: sink.destination });
    const events: string[] = [];
    let exited: (code: number) => void = () => undefined;
    const exitCode = new Promise<number>((resolve) => (exited = resolve));
    const releasers = createReleasers(logger, { exit: (code) => exited(code), timeoutMs: 400 });
    releasers.add(
      'postgres',
      async () => void events.push('postgres closed'),
      () => void events.push('postgres forced'),
    );
    // A close that never ends (a QUIT to a Redis that is gone), and one whose force itself hangs.
    releasers.add(
      'worker',
      () => new Promise(() => undefined),
      () => {
        events.push('worker forced');
        return new Promise(() => undefined);
      },
    );
    releasers.add(
      'http',
      async () => void events.push('http closed'),
      () => void events.push('http forced'),
    );

    const started = performance.now();
    void releasers.shutdown('SIGTERM');
    expect(await exitCode).toBe(1);
    const elapsed = performance.now() - started;
    // Not before bound − budget (the graceful part had its time); and it did exit, though one force never settles
    // (the wall-clock bound itself is checked on real processes: test/reliability/processes-stop-within-their-bound-*).
    expect(elapsed).toBeGreaterThanOrEqual(400 - forceBudgetMs(400) - 5);
    // Closed ones are not forced; the stuck one and those after it are, newest first.
    expect(events).toEqual(['http closed', 'worker forced', 'postgres forced']);
    const lines = sink.lines.map((l) => JSON.parse(l) as { msg: string; open?: string[] });
    expect(lines.find((l) => l.msg.startsWith('shutdown did not finish'))?.open).toEqual(['worker', 'postgres']);
    expect(lines.at(-1)?.msg).toBe('stopped (forced): exiting 1');
  });

  it('a shutdown that finishes in time exits with its own code and forces nothing', async () => {
    const forced: string[] = [];
    const exits: number[] = [];
    const releasers = createReleasers(createLogger({ name: 't', level: 'silent' }), {
      exit: (c) => void exits.push(c),
      timeoutMs: 5000,
    });
    releasers.add(
      'redis',
      async () => undefined,
      () => void forced.push('redis'),
    );
    releasers.setTimeout(10_000);
    await releasers.shutdown('SIGTERM');
    expect(exits).toEqual([0]);
    expect(forced).toEqual([]);
  });
});
