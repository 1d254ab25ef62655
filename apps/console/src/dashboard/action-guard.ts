/**
 * The dashboard actions the console allows, as bull-board's route patterns (under the dashboard's base path).
 * Replay is safe (applyEvent's receipt under (OrderNo, state) is the guard), so retrying one job and promoting
 * delayed jobs are allowed. Everything that edits or destroys queue state (add, update data, clean, empty,
 * obliterate, pause, rate limits, schedulers) is refused with 403: a callback job is the only copy of what the
 * platform told us, and no operator action needs to change it. "Retry all" is refused too (issue 49): it sent
 * every failed job back at once with no dry run, no rate, no count or job ids in its audit row and nothing on the
 * orders' stories; the replay wizard (/replays/new) does the same work with all of those.
 */
const ALLOWED = new Set([
  'PUT /api/queues/:queueName/:jobId/retry',
  'PUT /api/queues/:queueName/:jobId/promote',
  'PUT /api/queues/:queueName/promote',
]);

/** bull-board's "Retry all" (of any list): refused with a pointer to the replay wizard. */
export const RETRY_ALL_ROUTE = '/api/queues/:queueName/retry/:queueStatus';

/** What a refused "Retry all" is told, on the board and in the 403's body. */
export const RETRY_ALL_REFUSED =
  '"Retry all" is not offered here: replay failed jobs from the replay wizard (/replays/new), which dry-runs them ' +
  "first, sends them back at a rate, and records the count, each job and a line on each order's story";

/** Whether a dashboard request (method, bull-board route pattern relative to the base path) is allowed. */
export function isAllowedDashboardAction(method: string, routePattern: string): boolean {
  const m = method.toUpperCase();
  if (m === 'GET' || m === 'HEAD') return true;
  return ALLOWED.has(`${m} ${routePattern}`);
}

/**
 * The role-gated action (and audit target) of an allowed dashboard request that changes something; undefined for
 * reads.
 */
export function dashboardActionOf(
  method: string,
  routePattern: string,
  params: Record<string, unknown>,
): { action: 'queue.retry' | 'queue.promote'; target: string } | undefined {
  const m = method.toUpperCase();
  if (m === 'GET' || m === 'HEAD') return undefined;
  const queue = String(params.queueName ?? '');
  switch (routePattern) {
    case '/api/queues/:queueName/:jobId/retry':
      return { action: 'queue.retry', target: `job:${queue}/${String(params.jobId)}` };
    case '/api/queues/:queueName/:jobId/promote':
      return { action: 'queue.promote', target: `job:${queue}/${String(params.jobId)}` };
    case '/api/queues/:queueName/promote':
      return { action: 'queue.promote', target: `queue:${queue}/delayed` };
    default:
      return undefined;
  }
}
