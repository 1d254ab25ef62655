/**
 * The dashboard actions the console allows, as bull-board's route patterns (under the dashboard's base path).
 * Replay is safe (applyEvent's receipt under (OrderNo, state) is the guard), so retrying one job, retrying all
 * failed jobs and promoting delayed jobs are allowed. Everything that edits or destroys queue state (add, update
 * data, clean, empty, obliterate, pause, rate limits, schedulers, retry-all of completed jobs) is refused with
 * 403: a callback job is the only copy of what the platform told us, and no operator action needs to change it.
 */
const ALLOWED = new Set([
  'PUT /api/queues/:queueName/:jobId/retry',
  'PUT /api/queues/:queueName/retry/:queueStatus',
  'PUT /api/queues/:queueName/:jobId/promote',
  'PUT /api/queues/:queueName/promote',
]);

/** Whether a dashboard request (method, bull-board route pattern relative to the base path, params) is allowed. */
export function isAllowedDashboardAction(
  method: string,
  routePattern: string,
  params: Record<string, unknown>,
): boolean {
  const m = method.toUpperCase();
  if (m === 'GET' || m === 'HEAD') return true;
  if (!ALLOWED.has(`${m} ${routePattern}`)) return false;
  // Retry-all only for failed jobs: re-running days of completed jobs is load without purpose.
  if (routePattern === '/api/queues/:queueName/retry/:queueStatus') return params.queueStatus === 'failed';
  return true;
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
    case '/api/queues/:queueName/retry/:queueStatus':
      return { action: 'queue.retry', target: `queue:${queue}/${String(params.queueStatus)}` };
    case '/api/queues/:queueName/:jobId/promote':
      return { action: 'queue.promote', target: `job:${queue}/${String(params.jobId)}` };
    case '/api/queues/:queueName/promote':
      return { action: 'queue.promote', target: `queue:${queue}/delayed` };
    default:
      return undefined;
  }
}
