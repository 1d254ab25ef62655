import { describe, expect, it } from 'vitest';
import {
  BYTES_PER_IDLE_CONNECTION,
  connectionCapacity,
  MEMORY_SHARE,
  openFileLimit,
  RESERVED_FILES,
} from '../src/capacity.ts';
import { sourceKey } from '../src/connection-guard.ts';

// INGEST_MAX_CONNECTIONS=auto: the cap follows the open-file limit and the memory this process may use, so a host
// with a raised limit holds more slow clients, and one with the common 1,024 never reaches EMFILE.
const LIMITS = `Limit                     Soft Limit           Hard Limit           Units
Max cpu time              unlimited            unlimited            seconds
Max open files            20000                1048576              files
Max locked memory         8388608              8388608              bytes`;
const GiB = 1024 ** 3;

describe('the open-file limit', () => {
  it('is the soft limit read from /proc/self/limits, and unknown when it cannot be read', () => {
    expect(openFileLimit(() => LIMITS)).toBe(20_000);
    expect(openFileLimit(() => LIMITS.replace('20000     ', 'unlimited '))).toBe(Number.MAX_SAFE_INTEGER);
    expect(openFileLimit(() => 'nothing here')).toBeUndefined();
    expect(
      openFileLimit(() => {
        throw new Error('ENOENT');
      }),
    ).toBeUndefined();
    // This process: Linux, so there is one.
    expect(openFileLimit()).toBeGreaterThan(0);
  });
});

describe('INGEST_MAX_CONNECTIONS=auto', () => {
  it('takes the open-file limit less the reserve when memory allows more', () => {
    expect(connectionCapacity('auto', { processes: 1, openFiles: 20_000, memoryBytes: 16 * GiB })).toMatchObject({
      maxConnections: 20_000 - RESERVED_FILES,
      limitedBy: 'open files',
    });
    expect(connectionCapacity('auto', { processes: 1, openFiles: 1024, memoryBytes: 16 * GiB }).maxConnections).toBe(
      1024 - RESERVED_FILES,
    );
  });

  it('takes the memory share split over the ingest processes when files allow more', () => {
    const byMemory = Math.floor((2 * GiB * MEMORY_SHARE) / 4 / BYTES_PER_IDLE_CONNECTION);
    expect(connectionCapacity('auto', { processes: 4, openFiles: 1_048_576, memoryBytes: 2 * GiB })).toMatchObject({
      maxConnections: byMemory,
      limitedBy: 'memory',
    });
  });

  it('falls back to the common 1,024 files where the limit cannot be read', () => {
    expect(
      connectionCapacity('auto', { processes: 1, openFiles: undefined, memoryBytes: 16 * GiB }).maxConnections,
    ).toBe(1024 - RESERVED_FILES);
  });

  it('keeps a configured number, and warns when the open-file limit cannot hold it', () => {
    expect(connectionCapacity(500, { processes: 1, openFiles: 1024, memoryBytes: GiB })).toMatchObject({
      maxConnections: 500,
      limitedBy: 'configured',
    });
    expect(connectionCapacity(500, { processes: 1, openFiles: 1024, memoryBytes: GiB }).warning).toBeUndefined();
    expect(connectionCapacity(5000, { processes: 1, openFiles: 1024, memoryBytes: GiB }).warning).toMatch(
      /INGEST_MAX_CONNECTIONS=5000 is above .*open-file limit \(1024\).*EMFILE/,
    );
  });
});

describe('the source a connection is counted under', () => {
  it('is the IPv4 address (also IPv4-mapped), or the /64 of an IPv6 address', () => {
    expect(sourceKey('203.0.113.7')).toBe('203.0.113.7');
    expect(sourceKey('::ffff:203.0.113.7')).toBe('203.0.113.7');
    expect(sourceKey('2001:db8:1:2:aaaa::1')).toBe('2001:db8:1:2::/64');
    expect(sourceKey('2001:db8:1:2:bbbb:cccc:dddd:eeee')).toBe('2001:db8:1:2::/64');
    expect(sourceKey('::1')).toBe('0:0:0:0::/64');
    expect(sourceKey(undefined)).toBe('unknown');
  });
});
