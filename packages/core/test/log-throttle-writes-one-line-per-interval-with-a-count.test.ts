import { createLogger, createLogThrottle } from '@mcb/core/logger';
import { lineSink } from '@mcb/testkit';
import { describe, expect, it } from 'vitest';

describe('createLogThrottle', () => {
  it('writes the first occurrence at once, then at most one line per interval and key, counting what it held back', () => {
    const sink = lineSink();
    let now = 1_000_000;
    const log = createLogThrottle(createLogger({ name: 't', destination: sink.destination }), {
      intervalMs: 10_000,
      now: () => now,
    });
    const written: boolean[] = [];
    // 1. 25 errors of one connection over 25 s (one a second), and one of another key at the start.
    written.push(log('other', 'warn', {}, 'other'));
    for (let i = 0; i < 25; i++, now += 1000) written.push(log('redis', 'error', { n: i }, 'redis down'));
    const lines = sink.lines.map(
      (l) => JSON.parse(l) as { msg: string; n?: number; errorsSinceLastLine: number; level: number },
    );
    // 2. Keys are independent; the redis key wrote at 0 s, 10 s and 20 s, each line counting the errors it stands for.
    expect(lines.map((l) => [l.msg, l.n, l.errorsSinceLastLine])).toEqual([
      ['other', undefined, 1],
      ['redis down', 0, 1],
      ['redis down', 10, 10],
      ['redis down', 20, 10],
    ]);
    expect(written.filter(Boolean)).toHaveLength(4);
    expect(lines[1]?.level).toBe(50);
  });
});
