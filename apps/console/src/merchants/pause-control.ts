/**
 * The pause / resume form of a merchant's page (`/merchants/:ref`): a pause form while it runs, a resume form while it
 * is paused, each asking for the reason the audit trail keeps, and drawn only for a viewer whose role may do it
 * (`can`). The posts are merchants/pause-pages.ts's, which call the same actions as the API (pause.ts).
 */
import { can } from '../operators/roles.ts';
import type { Operator } from '../operators/operator.ts';
import { html, type Html } from '../web/html.ts';
import type { MerchantFigures } from './queries.ts';

export function pauseControl(merchant: MerchantFigures, viewer: Operator): Html | '' {
  const action = `/merchants/${encodeURIComponent(merchant.ref)}/${merchant.paused ? 'resume' : 'pause'}`;
  if (merchant.paused) {
    if (!can(viewer.role, 'merchants.resume')) return '';
    return html`<form class="inline pause-control" method="post" action="${action}">
<label>Why resume now? <input name="reason" required maxlength="2000" size="40" placeholder="e.g. keys rotated, \
platform fixed"></label>
<button class="primary" type="submit">Resume ${merchant.ref}</button></form>
<p class="muted">Its jobs run again within a second; the backlog drains at its Get order budget.</p>`;
  }
  if (!can(viewer.role, 'merchants.pause')) return '';
  return html`<form class="inline pause-control" method="post" action="${action}">
<label>Why pause it? <input name="reason" required maxlength="2000" size="40" placeholder="e.g. suspected key leak"></label>
<button class="danger" type="submit">Pause ${merchant.ref}</button></form>
<p class="muted">Its callbacks are still acknowledged and stored; none of its jobs runs until it is resumed. Other \
merchants go on.</p>`;
}
