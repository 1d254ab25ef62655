import { describe, expect, it } from 'vitest';
import { nextCaps, type LaneWindow } from '../src/lane-governor.ts';

// The lanes of one worker process share its event loop (lane-governor.ts): a lane taking more than its weighted
// share is held while the process is late on its own work and another lane is busy; never otherwise.

const OPTIONS = { targetDelayMs: 10, minCap: 8, busyCpu: 0.7 };
const LATE = { delayMs: 40, cpu: 0.95 };
const lane = (ref: string, o: Partial<LaneWindow> = {}): LaneWindow => ({
  ref,
  weight: 1,
  recentStarts: 0,
  inFlight: 0,
  limit: 1024,
  cap: Infinity,
  ...o,
});

describe('the lane governor', () => {
  it('holds nothing while one lane is busy, however late the loop: it has the whole process', () => {
    const caps = nextCaps([lane('a', { recentStarts: 400, inFlight: 900 }), lane('b')], LATE, OPTIONS);
    expect([...caps.values()]).toEqual([Infinity, Infinity]);
  });

  it('holds the lane over its share, a little below what it runs, and never the light one', () => {
    const lanes = [
      lane('a', { recentStarts: 400, inFlight: 900 }),
      lane('b', { recentStarts: 2, inFlight: 1 }),
      lane('c', { recentStarts: 2, inFlight: 1 }),
    ];
    const caps = nextCaps(lanes, LATE, OPTIONS);
    expect(caps.get('a')).toBe(873); // 900 × 0.97
    expect([caps.get('b'), caps.get('c')]).toEqual([Infinity, Infinity]);
    // Held window after window while the loop stays late, down to the floor.
    let cap = caps.get('a')!;
    for (let i = 0; i < 200; i++)
      cap = nextCaps([{ ...lanes[0]!, inFlight: cap, cap }, lanes[1]!, lanes[2]!], LATE, OPTIONS).get('a')!;
    expect(cap).toBe(8);
  });

  it('splits by weight: of two heavy lanes with weights 2 and 1 starting alike, only the lighter-weighted is held', () => {
    const caps = nextCaps(
      [
        lane('a', { weight: 2, recentStarts: 300, inFlight: 600 }),
        lane('d', { weight: 1, recentStarts: 300, inFlight: 600 }),
      ],
      LATE,
      OPTIONS,
    );
    expect(caps.get('a')).toBe(Infinity);
    expect(caps.get('d')).toBe(582);
  });

  it('does not hold a lane when the lateness is not this process’s work (another process keeps the cores busy)', () => {
    const lanes = [lane('a', { recentStarts: 400, inFlight: 900 }), lane('b', { recentStarts: 2, inFlight: 1 })];
    expect(nextCaps(lanes, { delayMs: 200, cpu: 0.2 }, OPTIONS).get('a')).toBe(Infinity);
    // A lane held before loosens instead.
    const held = [{ ...lanes[0]!, cap: 500 }, lanes[1]!];
    expect(nextCaps(held, { delayMs: 200, cpu: 0.2 }, OPTIONS).get('a')).toBe(516);
  });

  it('loosens the caps once the loop is on time, and lets go of them past the lane’s own limit', () => {
    const lanes = [
      lane('a', { recentStarts: 400, inFlight: 500, cap: 500, limit: 600 }),
      lane('b', { recentStarts: 2 }),
    ];
    const onTime = { delayMs: 2, cpu: 0.9 };
    let cap = nextCaps(lanes, onTime, OPTIONS).get('a')!;
    expect(cap).toBe(516);
    for (let i = 0; i < 20 && Number.isFinite(cap); i++)
      cap = nextCaps([{ ...lanes[0]!, cap }, lanes[1]!], onTime, OPTIONS).get('a')!;
    expect(cap).toBe(Infinity);
    // Between half the target and the target the cap holds where it is.
    expect(nextCaps(lanes, { delayMs: 7, cpu: 0.9 }, OPTIONS).get('a')).toBe(500);
  });
});
