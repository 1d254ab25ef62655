// What the worker's tests and the suites under test/ share (`@mcb/testkit/worker`): the fixture, the harness on
// runWorker, the crash tests' worker process and the checks of what the pipeline wrote.
import { fileURLToPath } from 'node:url';

export { orderState, reviewsFor } from './db-checks.ts';
export { payinJobs, releasedPayins } from './released-payins.ts';
export { workerTest } from './worker-fixture.ts';
export { startHarness, type Harness, type HarnessMetrics, type HarnessOptions } from './worker-harness.ts';
export { startWorkerMainProcess, type WorkerMainProcess } from './worker-main-process.ts';

/** A worker process for crash tests (runWorker; `worker-process.ts` lists its environment). Run it with node. */
export const WORKER_PROCESS_SCRIPT = fileURLToPath(new URL('./worker-process.ts', import.meta.url));
