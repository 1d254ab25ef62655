/**
 * Vitest setup file (vitest.config.ts `setupFiles`): every fast-check property draws the same cases on every run, so a
 * property test cannot pass on one run and fail on the next by the luck of its draw. A failure prints its seed and
 * path as usual; `FC_SEED=<integer> pnpm vitest run <file>` explores other draws (or replays a reported one).
 */
import fc from 'fast-check';

const DEFAULT_SEED = 20_261_126;
const raw = process.env.FC_SEED;
const seed = raw === undefined || raw === '' ? DEFAULT_SEED : Number(raw);
if (!Number.isInteger(seed)) throw new Error(`FC_SEED must be an integer (got ${JSON.stringify(raw)})`);
fc.configureGlobal({ ...fc.readConfigureGlobal(), seed });
