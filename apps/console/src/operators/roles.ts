import { OPERATOR_ROLES, PERSON_ROLES } from '@mcb/core/db';

/**
 * Who may do what, in one place. Routes, pages and the CLI never compare roles themselves: an action asks
 * {@link can} (and the action layer, audit/perform.ts, refuses with 403 naming {@link requiredRole}); a page asks
 * the same {@link can} before it renders a control, so the UI offers exactly what the server allows.
 */

/**
 * `viewer` reads; `operator` also acts; `admin` also reads the audit of others and manages replays of others.
 * `service` is not a person: a machine client (the shop's order system) that registers orders and reads the API,
 * with no reason asked, and may do nothing else ({@link SERVICE_ACTIONS}).
 */
export type Role = (typeof OPERATOR_ROLES)[number];

/** The people's roles, least first (the audit table's column lists the same, so they are declared beside it). */
export { PERSON_ROLES };
export type PersonRole = (typeof PERSON_ROLES)[number];

/** Every role, for the schemas that accept one (the operators file, whoami, the audit trail). */
export const ROLES = OPERATOR_ROLES;

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
  /** Pause a merchant: its jobs, sweep and replays wait (POST /api/merchants/:ref/pause). */
  'merchants.pause': 'operator',
  /** Resume a paused merchant (POST /api/merchants/:ref/resume). */
  'merchants.resume': 'operator',
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
} as const satisfies Record<string, PersonRole>;

export type Action = keyof typeof ACTIONS;

/**
 * Actions that change nothing (a read, a dry run, reading others' audit): a refusal of one is a 403 without an audit
 * row, as {@link can}'s callers in the action layer do with `assertCan`.
 */
export const CHANGES_NOTHING: ReadonlySet<Action> = new Set<Action>(['read', 'replays.plan', 'audit.readOthers']);

/**
 * All a `service` client may do: read (the API only, never pages or the dashboard: see operators/service-gate.ts)
 * and register orders, without a reason (a machine has none to give; its name in the audit row says who).
 */
export const SERVICE_ACTIONS: ReadonlySet<Action> = new Set<Action>(['read', 'orders.register']);

/** The least (person's) role that may do `action`. */
export function requiredRole(action: Action): PersonRole {
  return ACTIONS[action];
}

/** Whether `role` may do `action`. */
export function can(role: Role, action: Action): boolean {
  if (role === 'service') return SERVICE_ACTIONS.has(action);
  return PERSON_ROLES.indexOf(role) >= PERSON_ROLES.indexOf(ACTIONS[action]);
}

/** Whether `role` does `action` without a reason (a service registering an order); people always give one. */
export function reasonOptional(role: Role, action: Action): boolean {
  return role === 'service' && SERVICE_ACTIONS.has(action);
}

export function isRole(value: unknown): value is Role {
  return typeof value === 'string' && (ROLES as readonly string[]).includes(value);
}
