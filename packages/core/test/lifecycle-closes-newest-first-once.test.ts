import { createReleasers } from '@mcb/core/lifecycle';
import { createLogger } from '@mcb/core/logger';
import { describe, expect, it } from 'vitest';

describe('createReleasers', () => {
  it('closes newest first, keeps going past a failed close, runs once, then exits with the code', async () => {
    const closed: string[] = [];
    const exits: number[] = [];
    const releasers = createReleasers(createLogger({ name: 't', level: 'silent' }), {
      exit: (code) => void exits.push(code),
    });
    releasers.add('postgres', async () => void closed.push('postgres'));
    releasers.add('redis', async () => {
      closed.push('redis');
      throw new Error('already closed');
    });
    releasers.add('http', async () => void closed.push('http'));

    await Promise.all([releasers.shutdown('SIGTERM'), releasers.shutdown('SIGINT', 1)]);
    expect(closed).toEqual(['http', 'redis', 'postgres']);
    expect(exits).toEqual([0]);
  });
});
