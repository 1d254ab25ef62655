import type { Database } from '@mcb/core/db';
import { AppError, coerceError, ErrorCodes, isAppError } from '@mcb/core/errors';
import type { Logger } from '@mcb/core/logger';
import type { AuthMethod } from '../auth.ts';
import type { Operator } from '../operators/operator.ts';
import { can, reasonOptional, requiredRole, type Action } from '../operators/roles.ts';
import { inScope } from '../operators/scope.ts';
import { completeIntent, PENDING, recordAction } from './record.ts';
import { MAX_REASON, requirePlainText, storableText, VISIBLE } from './text.ts';

/**
 * The action layer: every action that changes something goes through {@link performAction} (an effect in our own
 * Postgres transaction) or {@link performExternalAction} (an effect with its own transaction or outside Postgres:
 * applyEvent, a sweep, a Redis job). Both check the role, require a reason and write the audit row; routes, pages
 * and the dashboard hook only call them. A refused role is recorded (`denied`); a missing reason is not (400,
 * nothing happened and there is nothing to say why).
 */

/** Who asks, and the request it came with (for the audit row's request id). */
export interface Actor {
  operator: Operator;
  requestId?: string;
  /** How the operator came in (a token, a session, the SSO proxy), for the audit row. */
  via?: AuthMethod;
}

/** What is asked. */
export interface ActionSpec {
  action: Action;
  target: string;
  /** The operator's reason, as received (validated here: required, at most {@link MAX_REASON} characters). */
  reason: unknown;
  /**
   * The number of the merchant the action is about (its target's: a review's, a replay's filter's, a queue's).
   * {@link authorize} refuses it (403, `denied`) outside the operator's scope ({@link inScope}); left out or null, the
   * action is about no one merchant, which only an operator without a scope may do. Recorded on the audit row.
   */
  merchant?: string | null;
}

/** What an effect reports for the audit row. */
export interface EffectResult<T> {
  result: T;
  /** `applied`, `dismissed`, `created`, ... */
  outcome: string;
  details?: Record<string, unknown>;
}

/** What the action layer needs. */
export interface ActionDeps {
  db: Database;
  logger: Logger;
}

export { MAX_REASON } from './text.ts';

/** 403 naming the role `action` needs (and `requiredRole` in the body, for the CLI and the UI). */
export function forbidden(operator: Operator, action: Action): AppError {
  const needed = requiredRole(action);
  const who =
    operator.role === 'service'
      ? `${operator.name} is a service client (it may register orders and read the API only)`
      : `${operator.name} is ${operator.role}`;
  return new AppError(ErrorCodes.FORBIDDEN, `${action} needs the role ${needed}; ${who}`, {
    details: { requiredRole: needed, action },
  });
}

/**
 * 403 for an action on a merchant outside the operator's scope. It names neither the merchant nor its number (the
 * operator asked for it; the refusal tells nothing more), and says how the operator is scoped.
 */
export function outOfScope(operator: Operator, action: Action): AppError {
  return new AppError(
    ErrorCodes.FORBIDDEN,
    `${action}: not within the merchants of ${operator.name} (${operator.scope?.refs.join(', ') ?? 'all'})`,
    { details: { action, merchants: operator.scope?.refs ?? [] } },
  );
}

/** Throws 403 unless the operator may do `action` (for reads such as `audit.readOthers`, which leave no audit row). */
export function assertCan(operator: Operator, action: Action): void {
  if (!can(operator.role, action)) throw forbidden(operator, action);
}

/**
 * The reason, trimmed; 400 REASON_REQUIRED when it is missing, blank, without a single visible character (zero-width
 * spaces, soft hyphens, bidi marks only) or not text, 400 REQUEST_INVALID when too long, when it holds characters that
 * cannot be stored as written or that reorder how it reads ({@link requirePlainText}): refused before
 * anything happens.
 */
export function requireReason(reason: unknown): string {
  const text = typeof reason === 'string' ? reason.trim() : '';
  if (!VISIBLE.test(text)) {
    throw new AppError(
      ErrorCodes.REASON_REQUIRED,
      'a reason is required: say why (`reason` in the JSON body, or the X-Reason header for dashboard actions)',
      {
        details: { errors: [{ field: 'reason', message: 'required' }] },
      },
    );
  }
  if (text.length > MAX_REASON) {
    throw new AppError(ErrorCodes.REQUEST_INVALID, `the reason is too long (at most ${MAX_REASON} characters)`, {
      details: { errors: [{ field: 'reason', message: `at most ${MAX_REASON} characters` }] },
    });
  }
  requirePlainText('reason', text);
  return text;
}

/** A reason as far as it can be recorded on a refusal (which must be written whatever the operator sent). */
const storableReason = (reason: unknown) => (typeof reason === 'string' ? storableText(reason.trim(), MAX_REASON) : '');

/** Proof that an action passed its checks: what {@link commitAction} and {@link commitExternalAction} take. */
export interface Authorized {
  readonly actor: Actor;
  readonly spec: ActionSpec;
  /** The reason, trimmed and checked. */
  readonly reason: string;
}

/** The refusal (a `denied` row, a warning, 403) of an action the role may not do (`roleOk` false) or out of scope. */
async function refuseUnlessAllowed(deps: ActionDeps, actor: Actor, spec: ActionSpec, roleOk: boolean): Promise<void> {
  if (roleOk && inScope(actor.operator, spec.merchant)) return;
  await recordAction(deps.db, {
    ...actor,
    action: spec.action,
    target: spec.target,
    reason: storableReason(spec.reason),
    outcome: 'denied',
    merchantNo: spec.merchant,
    ...(roleOk ? { details: { refused: 'scope' } } : {}),
  }).catch((e: unknown) =>
    deps.logger.error(
      { err: coerceError(e), action: spec.action, operator: actor.operator.name },
      'audit row of a refused action not written',
    ),
  );
  deps.logger.warn(
    {
      action: spec.action,
      target: spec.target,
      operator: actor.operator.name,
      role: actor.operator.role,
      merchantNo: spec.merchant,
    },
    roleOk ? "action refused: outside the operator's merchants" : 'action refused for the role',
  );
  throw roleOk ? outOfScope(actor.operator, spec.action) : forbidden(actor.operator, spec.action);
}

/**
 * The scope check alone, for an action that asks no reason and leaves no row when the role refuses it (a dry run):
 * outside the operator's merchants, 403 with a `denied` row naming the merchant, as {@link authorize} does.
 */
export async function assertInScope(deps: ActionDeps, actor: Actor, spec: Omit<ActionSpec, 'reason'>): Promise<void> {
  await refuseUnlessAllowed(deps, actor, { ...spec, reason: undefined }, true);
}

/**
 * Role, then scope (the action's merchant among the operator's: {@link inScope}), then reason: a viewer is told they may not, whatever they wrote; a refusal is recorded as `denied`. Call it
 * before any work (asking the platform, reading much); then commit the effect with what it returns.
 */
export async function authorize(deps: ActionDeps, actor: Actor, spec: ActionSpec): Promise<Authorized> {
  await refuseUnlessAllowed(deps, actor, spec, can(actor.operator.role, spec.action));
  // A service (the shop registering an order) gives no reason; one it does give is checked like anyone's.
  const blank = spec.reason === undefined || (typeof spec.reason === 'string' && spec.reason.trim() === '');
  const reason = blank && reasonOptional(actor.operator.role, spec.action) ? '' : requireReason(spec.reason);
  return { actor, spec, reason };
}

/**
 * A failed action is recorded too, after its transaction rolled back (best effort: the database may be what failed).
 */
export async function recordFailure(deps: ActionDeps, auth: Authorized, error: unknown): Promise<void> {
  const code = isAppError(error) ? error.code : ErrorCodes.INTERNAL_ERROR;
  const { actor, spec, reason } = auth;
  await recordAction(deps.db, {
    ...actor,
    action: spec.action,
    target: spec.target,
    reason,
    outcome: `failed:${code}`,
    merchantNo: spec.merchant,
  }).catch((e: unknown) =>
    deps.logger.error(
      { err: coerceError(e), action: spec.action, operator: actor.operator.name },
      'audit row of a failed action not written',
    ),
  );
}

/** Run `effect` in one transaction with its audit row: both commit, or neither. The effect must use `tx` only. */
export async function commitAction<T>(
  deps: ActionDeps,
  auth: Authorized,
  effect: (tx: Database) => Promise<EffectResult<T>>,
): Promise<T> {
  const { actor, spec, reason } = auth;
  try {
    const done = await deps.db.transaction(async (tx) => {
      const r = await effect(tx);
      await recordAction(tx, {
        ...actor,
        action: spec.action,
        target: spec.target,
        reason,
        outcome: r.outcome,
        details: r.details,
        merchantNo: spec.merchant,
      });
      return r;
    });
    log(deps, auth, done.outcome);
    return done.result;
  } catch (e) {
    await recordFailure(deps, auth, e);
    throw e;
  }
}

/**
 * Write the audit row of an effect that commits on its own as an intent (outcome `pending`), before the effect: if it
 * cannot be written, this throws and the effect must not run. Complete it with {@link completeIntent}.
 */
export async function recordIntent(
  deps: ActionDeps,
  auth: Authorized,
  details?: Record<string, unknown>,
): Promise<number> {
  const { actor, spec, reason } = auth;
  return recordAction(deps.db, {
    ...actor,
    action: spec.action,
    target: spec.target,
    reason,
    outcome: PENDING,
    details,
    merchantNo: spec.merchant,
  });
}

/** Complete an intent row with a failure (best effort: the database may be what failed; the row then stays pending). */
export async function completeIntentFailed(
  deps: ActionDeps,
  auth: Authorized,
  intentId: number,
  outcome: string,
): Promise<void> {
  await completeIntent(deps.db, intentId, outcome).catch((e: unknown) =>
    deps.logger.error(
      { err: coerceError(e), action: auth.spec.action, operator: auth.actor.operator.name, intentId },
      'audit row of a failed action not completed',
    ),
  );
}

/**
 * Run an effect that commits on its own (settlement's applyEvent, a reconciliation sweep) or lives outside Postgres
 * (a job in Redis). Its audit row is written first, as an intent ({@link recordIntent}): no intent row, no effect.
 * Once the effect is done the row is completed with its outcome; `finish`, when given, runs in that completion's
 * transaction (a follow-up of ours that must commit with the record). A row left `pending` means the effect may have
 * happened but its outcome could not be recorded.
 */
export async function commitExternalAction<T>(
  deps: ActionDeps,
  auth: Authorized,
  effect: () => Promise<EffectResult<T> & { finish?: (tx: Database) => Promise<void> }>,
): Promise<T> {
  const intentId = await recordIntent(deps, auth);
  let done: EffectResult<T> & { finish?: (tx: Database) => Promise<void> };
  try {
    done = await effect();
  } catch (e) {
    await completeIntentFailed(deps, auth, intentId, `failed:${isAppError(e) ? e.code : ErrorCodes.INTERNAL_ERROR}`);
    throw e;
  }
  await deps.db.transaction(async (tx) => {
    await done.finish?.(tx);
    await completeIntent(tx, intentId, done.outcome, done.details);
  });
  log(deps, auth, done.outcome);
  return done.result;
}

/** {@link authorize} then {@link commitAction}. */
export async function performAction<T>(
  deps: ActionDeps,
  actor: Actor,
  spec: ActionSpec,
  effect: (tx: Database) => Promise<EffectResult<T>>,
): Promise<T> {
  return commitAction(deps, await authorize(deps, actor, spec), effect);
}

/** {@link authorize} then {@link commitExternalAction}. */
export async function performExternalAction<T>(
  deps: ActionDeps,
  actor: Actor,
  spec: ActionSpec,
  effect: () => Promise<EffectResult<T> & { finish?: (tx: Database) => Promise<void> }>,
): Promise<T> {
  return commitExternalAction(deps, await authorize(deps, actor, spec), effect);
}

function log(deps: ActionDeps, { actor, spec, reason }: Authorized, outcome: string) {
  deps.logger.info(
    {
      action: spec.action,
      target: spec.target,
      merchantNo: spec.merchant,
      operator: actor.operator.name,
      role: actor.operator.role,
      outcome,
      reasonLength: reason.length,
      requestId: actor.requestId,
    },
    'operator action',
  );
}
