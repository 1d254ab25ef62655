/**
 * Who may do what, in one place. Routes, pages and the CLI never compare roles themselves: an action asks
 * {@link can} (and the action layer, audit/perform.ts, refuses with 403 naming {@link requiredRole}); a page asks
 * the same {@link can} before it renders a control, so the UI offers exactly what the server allows.
 */

/** `viewer` reads; `operator` also acts; `admin` also reads the audit of others and manages replays of others. */
export type Role = 'viewer' | 'operator' | 'admin';

export const ROLES: readonly Role[] = ['viewer', 'operator', 'admin'];

/** Everything an operator can do that the console gates by role, with the least role that may do it. */
export const ACTIONS = {
  /** Read anything the console shows (orders, callbacks, reviews, replays, the dashboard, one's own audit). */
  read: 'viewer',
  /** Register a pay-in or a payout (POST /api/payins, /api/payouts). */
  'orders.register': 'operator',
  /** Fetch the payment-method catalog from the platform now and store it (POST /api/payment-methods/refresh). */
  'catalog.refresh': 'operator',
  /** Re-verify a review now (Get order asked again). */
  'reviews.reverify': 'operator',
  /** Close a review without applying its event. */
  'reviews.dismiss': 'operator',
  /** Run a reconciliation sweep now. */
  'reconcile.run': 'operator',
  /** Retry a job, or every failed job, from the dashboard (bull-board). */
  'queue.retry': 'operator',
  /** Promote a delayed job (or all) from the dashboard. */
  'queue.promote': 'operator',
  /** Dry-run a replay (classifies against the ledger and Get order; changes nothing, but asks the platform). */
  'replays.plan': 'operator',
  /** Start a replay. */
  'replays.start': 'operator',
  /** Cancel one's own replay. */
  'replays.cancel': 'operator',
  /** Cancel a replay another operator started. */
  'replays.cancelOthers': 'admin',
  /** Read every operator's audit trail (others read their own). */
  'audit.readOthers': 'admin',
} as const satisfies Record<string, Role>;

export type Action = keyof typeof ACTIONS;

const RANK: Record<Role, number> = { viewer: 0, operator: 1, admin: 2 };

/** The least role that may do `action`. */
export function requiredRole(action: Action): Role {
  return ACTIONS[action];
}

/** Whether `role` may do `action`. */
export function can(role: Role, action: Action): boolean {
  return RANK[role] >= RANK[ACTIONS[action]];
}

export function isRole(value: unknown): value is Role {
  return typeof value === 'string' && (ROLES as readonly string[]).includes(value);
}
