import { pickByRef, type ConsoleMerchant, type ConsoleMerchants } from '../web/route-deps.ts';
import type { MerchantScope, Operator } from './operator.ts';

/**
 * Operators scoped to merchants (docs/merchants.md "Operators scoped to merchants"). One rule, {@link inScope}: the
 * action layer (audit/perform.ts) asks it of every action's merchant before anything runs, and every list, search,
 * count and order page reads through {@link visibleMerchantNos} / {@link listMerchants}, so that an operator outside
 * a merchant's scope neither sees nor touches anything of it.
 */

/**
 * THE scope rule: whether `operator` may see or act on what belongs to the merchant numbered `merchantNo`. An
 * operator without a scope (CONSOLE_TOKEN's admin, an entry without `merchants`) may: every merchant, and what is
 * about none. A scoped operator may for its merchants only; what belongs to no merchant (`null`: the maintenance
 * queue, a sweep of every merchant) is outside every scope.
 */
export function inScope(operator: Pick<Operator, 'scope'>, merchantNo: string | null | undefined): boolean {
  if (!operator.scope) return true;
  return merchantNo !== null && merchantNo !== undefined && operator.scope.merchantNos.has(merchantNo);
}

/** The merchants `operator` sees, in config order (every one without a scope). */
export function merchantsInScope(operator: Pick<Operator, 'scope'>, merchants: ConsoleMerchants): ConsoleMerchant[] {
  return merchants.all.filter((m) => inScope(operator, m.merchant.merchantNo));
}

/**
 * The merchant numbers a read keeps to: undefined (no filter at all, as before merchants were scoped) for an
 * operator without a scope, else its merchants' numbers.
 */
export function visibleMerchantNos(operator: Pick<Operator, 'scope'>): readonly string[] | undefined {
  return operator.scope ? [...operator.scope.merchantNos] : undefined;
}

/**
 * The `?merchant=` rule of every list: a ref names one of the operator's merchants, whose number the list keeps to;
 * a ref outside its scope answers exactly as an unknown one (400 REQUEST_INVALID naming the field, listing only the
 * operator's own refs), so that a refusal never tells another merchant exists. Without a ref: every merchant in
 * scope (undefined: no filter, for an operator without a scope).
 */
export function listMerchants(
  operator: Pick<Operator, 'scope'>,
  merchants: ConsoleMerchants,
  ref: string | undefined,
  field = 'merchant',
): readonly string[] | undefined {
  if (ref === undefined || ref === '') return visibleMerchantNos(operator);
  const visible = merchantsInScope(operator, merchants);
  return [pickByRef(visible, (m) => m.merchant.ref, ref, field).merchant.merchantNo];
}

/**
 * The one merchant a read names (`?merchant=` of the catalog, of an order): as {@link pickByRef} over the operator's
 * merchants, so that a ref outside its scope is the same 400 as an unknown one; without a ref, its only merchant.
 */
export function readingMerchant(
  operator: Pick<Operator, 'scope'>,
  merchants: ConsoleMerchants,
  ref: string | undefined,
  field = 'merchant',
): ConsoleMerchant {
  if (!operator.scope) return merchants.of(ref, field);
  return pickByRef(merchantsInScope(operator, merchants), (m) => m.merchant.ref, ref, field);
}

/**
 * The merchant a request that acts on one names (order registration, a replay by filter): as {@link pickByRef} over
 * every configured merchant (unknown → 400), except that a `service` client or operator scoped to exactly one
 * merchant may leave the ref out (it defaults to that merchant). Scope itself is checked by the action layer, so
 * that a ref outside it is a 403 with its audit row.
 */
export function actingMerchant(
  operator: Pick<Operator, 'scope'>,
  merchants: ConsoleMerchants,
  ref: string | undefined,
  field = 'merchant',
): ConsoleMerchant {
  if ((ref === undefined || ref === '') && merchants.several && operator.scope?.refs.length === 1)
    return merchants.of(operator.scope.refs[0], field);
  return merchants.of(ref, field);
}

/**
 * A scope from an operators-file entry's refs, against the configured merchants; the problem (unknown ref, empty list,
 * duplicate) as a message, for the file's CONFIG_INVALID.
 */
export function scopeOf(
  refs: readonly string[] | undefined,
  merchants: readonly { ref: string; merchantNo: string }[],
): MerchantScope | undefined | { problem: string } {
  if (refs === undefined) return undefined;
  if (refs.length === 0) return { problem: 'expected at least one merchant ref (leave `merchants` out for all)' };
  const seen = new Set<string>();
  const nos = new Set<string>();
  for (const ref of refs) {
    if (seen.has(ref)) return { problem: `the ref "${ref.slice(0, 40)}" appears twice` };
    seen.add(ref);
    const m = merchants.find((x) => x.ref === ref);
    if (!m)
      return {
        problem: `unknown merchant "${ref.slice(0, 40)}"; expected refs of MERCHANTS_FILE (${merchants.map((x) => x.ref).join(', ')})`,
      };
    nos.add(m.merchantNo);
  }
  return Object.freeze({ refs: Object.freeze([...refs]), merchantNos: nos });
}

/** What a list reads by: the merchant numbers it keeps to (undefined: all) and each row's ref (with two or more). */
export interface ListScope {
  merchantNos: readonly string[] | undefined;
  /** A row's `merchant` ref: only when the deployment has two or more merchants (the merchant column). */
  refOf?: (merchantNo: string) => string | undefined;
}

/** {@link listMerchants} and the merchant column of one list request. */
export function listScopeOf(
  operator: Pick<Operator, 'scope'>,
  merchants: ConsoleMerchants | undefined,
  ref: string | undefined,
): ListScope {
  if (!merchants) return { merchantNos: visibleMerchantNos(operator) };
  return {
    merchantNos: listMerchants(operator, merchants, ref),
    ...(merchants.several ? { refOf: (no: string) => merchants.byNo(no)?.merchant.ref } : {}),
  };
}
