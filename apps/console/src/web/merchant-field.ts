import type { Operator } from '../operators/operator.ts';
import { merchantsInScope } from '../operators/scope.ts';
import { html, type Html } from './html.ts';
import type { ConsoleMerchants } from './route-deps.ts';

/**
 * The refs a list's merchant field offers `operator`: its merchants (operators/scope.ts), in config order; undefined
 * (no field) while the console serves one merchant.
 */
export function merchantChoices(
  operator: Pick<Operator, 'scope'>,
  merchants: ConsoleMerchants | undefined,
): readonly string[] | undefined {
  return merchants?.several ? merchantsInScope(operator, merchants).map((m) => m.merchant.ref) : undefined;
}

/**
 * The merchant field of a list's filter form (its `?merchant=`): "every one" (the default: every merchant of the
 * operator's) or one of `refs`, `chosen` selected; nothing without refs (one merchant).
 */
export function merchantField(refs: readonly string[] | undefined, chosen: string | undefined): Html {
  if (!refs) return html``;
  return html`<label>Merchant <select name="merchant"><option value="">every one</option>${refs.map(
    (r) => html`<option value="${r}"${chosen === r ? html` selected` : ''}>${r}</option>`,
  )}</select></label>`;
}
