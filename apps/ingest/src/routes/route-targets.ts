/**
 * Which merchant a callback route serves, resolved once: the legacy routes are bound to the `legacyRoutes` merchant
 * when they are registered, and `/callbacks/m/:ref` costs one Map look-up. A route no merchant serves resolves to a
 * target of its own that opens callbacks with the decoy ring and refuses them, so that it answers as a wrong key does.
 */
import type { KeyRing } from '@mcb/core/callback';
import type { CallbackKind } from '@mcb/core/queue';
import type { IngestLane } from '../lanes.ts';

/** The routes of DESIGN.md, served by the `legacyRoutes` merchant, and the kind each expects (`undefined`: the record's). */
export const CALLBACK_ROUTES: Readonly<Record<string, CallbackKind | undefined>> = {
  '/callbacks': undefined,
  '/callbacks/payin': 'payin',
  '/callbacks/payout': 'payout',
};

/** A merchant's own routes (docs/merchants.md): `:ref` is the merchant's ref. */
export const MERCHANT_CALLBACK_ROUTES: Readonly<Record<string, CallbackKind | undefined>> = {
  '/callbacks/m/:ref': undefined,
  '/callbacks/m/:ref/payin': 'payin',
  '/callbacks/m/:ref/payout': 'payout',
};

/** Every callback route's pattern, as fastify reports the one a request matched (`routeOptions.url`). */
export const ALL_CALLBACK_ROUTES: ReadonlySet<string> = new Set([
  ...Object.keys(CALLBACK_ROUTES),
  ...Object.keys(MERCHANT_CALLBACK_ROUTES),
]);

const MERCHANT_CALLBACK_PATH = /^\/callbacks\/m\/[^/]+(?:\/payin|\/payout)?$/;

/** Whether a path (as sent, without its query) is one of the callback routes', whatever merchant it names. */
export function isCallbackPath(path: string): boolean {
  return path in CALLBACK_ROUTES || MERCHANT_CALLBACK_PATH.test(path);
}

/**
 * The metric label of callbacks to a route no merchant serves: outside the refs' alphabet (`[a-z0-9-]`), so it
 * never names a merchant, and one value whatever was guessed.
 */
export const UNKNOWN_MERCHANT_LABEL = '_unknown';

/** What a callback route resolved to. */
export interface RouteTarget {
  /** The merchant's lane; undefined when no merchant is served here (the callback is refused). */
  readonly lane: IngestLane | undefined;
  /** The ring its callbacks are decrypted with: the merchant's own, or the decoy. */
  readonly keyRing: KeyRing;
  /** Its `merchant` metric label: a configured ref (`default` without MERCHANTS_FILE), or {@link UNKNOWN_MERCHANT_LABEL}. */
  readonly label: string;
}

/** Every target, made once. */
export interface RouteTargets {
  /** The target of `/callbacks/m/{ref}`: its merchant's, or the unknown one. */
  of(ref: string): RouteTarget;
  /** The target of `/callbacks`, `/callbacks/payin` and `/callbacks/payout`. */
  readonly legacy: RouteTarget;
}

/**
 * The targets of `lanes`. Their metrics always carry a `merchant` label, `default` for the one merchant MERCHANT_NO
 * makes, so that the alert rules and the dashboard read one shape of series whether MERCHANTS_FILE is set or not.
 */
export function routeTargets(lanes: readonly IngestLane[], decoyKeyRing: KeyRing): RouteTargets {
  const unknown: RouteTarget = { lane: undefined, keyRing: decoyKeyRing, label: UNKNOWN_MERCHANT_LABEL };
  const byRef = new Map<string, RouteTarget>(
    lanes.map((lane) => [lane.merchant.ref, { lane, keyRing: lane.keyRing, label: lane.merchant.ref }]),
  );
  const legacy = lanes.find((l) => l.merchant.legacyRoutes);
  return {
    of: (ref) => byRef.get(ref) ?? unknown,
    legacy: (legacy && byRef.get(legacy.merchant.ref)) ?? unknown,
  };
}
