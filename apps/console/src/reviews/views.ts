import type { Operator } from '../operators/operator.ts';
import { can } from '../operators/roles.ts';
import { amountText, detailValue, orderHref, status, when } from '../web/format.ts';
import { html, type Html } from '../web/html.ts';
import { merchantField } from '../web/merchant-field.ts';
import type { ReviewFilter, ReviewList, ReviewView } from './queries.ts';

/**
 * One review: what failed and why, what was compared, and (for a role that may act, and while it is open) the two
 * actions, each with the reason the audit trail keeps. `back` is where the form returns to.
 */
export function reviewCard(r: ReviewView, viewer: Operator, back: string): Html {
  const details = Object.entries(r.details ?? {});
  const actions =
    r.status === 'open' && (can(viewer.role, 'reviews.reverify') || can(viewer.role, 'reviews.dismiss'))
      ? html`<div class="actions">
${
  can(viewer.role, 'reviews.reverify')
    ? html`<form class="inline" method="post" action="/reviews/${r.id}/reverify">
<input type="hidden" name="back" value="${back}">
<label>Why re-verify now? <input name="reason" required maxlength="2000" size="40" placeholder="e.g. platform \
confirmed the amount by phone"></label>
<button class="primary" type="submit">Re-verify review ${r.id}</button></form>`
    : ''
}
${
  can(viewer.role, 'reviews.dismiss')
    ? html`<form class="inline" method="post" action="/reviews/${r.id}/dismiss">
<input type="hidden" name="back" value="${back}">
<label>Why dismiss (kept as the note)? <input name="reason" required maxlength="2000" size="40" placeholder="e.g. \
forged: platform never had this order"></label>
<button class="danger" type="submit">Dismiss review ${r.id}</button></form>`
    : ''
}
</div>`
      : r.status === 'open'
        ? html`<p class="muted">Re-verify and dismiss need the role operator (you are ${viewer.role}).</p>`
        : '';
  return html`<article class="card" id="review-${r.id}" aria-labelledby="review-${r.id}-title">
<h2 id="review-${r.id}-title">Review ${r.id} ${status(r.status)} <code>${r.reasonCode}</code></h2>
${storyBlock(r)}
<p>${r.reason}</p>
<dl class="facts">
${r.merchant ? html`<dt>Merchant</dt><dd>${r.merchant}</dd>` : ''}<dt>Order</dt><dd><a href="${orderHref(
    r.merchantOrderNo,
  )}${r.merchant ? `?merchant=${encodeURIComponent(r.merchant)}` : ''}">${r.merchantOrderNo}</a> · platform \
<code>${r.orderNo}</code> · ${r.kind} state ${r.state}</dd>
<dt>Opened</dt><dd>${when(r.createdAt)}${r.occurrences > 1 ? html` · landed here ${r.occurrences} times` : ''}</dd>
${r.closedAt ? html`<dt>Closed</dt><dd>${when(r.closedAt)}</dd>` : ''}
${r.status === 'dismissed' ? html`<dt>Dismissed by</dt><dd data-closed-by>${r.closedBy ?? 'unknown'}</dd>` : ''}
${r.note ? html`<dt>Note</dt><dd>${r.note}</dd>` : ''}
${details.map(([k, v]) => html`<dt>${k}</dt><dd class="mono">${/amount$/i.test(k) ? amountText(v) : detailValue(v)}</dd>`)}
</dl>
${r.events.length > 1 ? eventsTable(r) : ''}
${r.attempts.length > 0 ? attemptsTable(r) : ''}
${actions}
</article>`;
}

/** The review in words: what happened and the next step (with its command), above the finding as recorded. */
function storyBlock(r: ReviewView): Html {
  const s = r.story;
  return html`<div class="story${s.suspectedForgery ? ' story-forgery' : ''}" id="review-${r.id}-story">
<p><strong>${s.suspectedForgery ? 'Suspected forgery. ' : ''}What happened:</strong> ${s.happened}</p>
<p><strong>Next step:</strong> ${s.nextStep}</p>
${s.command ? html`<p><code class="command">${s.command}</code></p>` : ''}
</div>`;
}

/** Every distinct event that landed in the review: a forged one and the genuine one of a pair are two rows. */
function eventsTable(r: ReviewView): Html {
  return html`<table aria-label="Events of review ${r.id}">
<caption>${r.events.length} different events of this pair landed here</caption>
<thead><tr><th>First seen</th><th>Amount claimed</th><th>State</th><th>Copies</th><th>Finding</th></tr></thead>
<tbody>${r.events.map(
    (e) =>
      html`<tr><td>${when(e.firstSeenAt)}</td><td class="num">${amountText(e.fiatAmount)}</td><td>${e.state ?? '—'}</td><td \
class="num">${e.seen}</td><td><code>${e.reasonCode}</code> ${e.reason}</td></tr>`,
  )}</tbody>
</table>`;
}

/** The review's history: each re-verify and each commit of its pair, oldest first; the finding above never changes. */
function attemptsTable(r: ReviewView): Html {
  // class="stack": at 375 px each attempt is a block of labelled lines, as every other table of the console.
  return html`<table class="stack" aria-label="History of review ${r.id}">
<caption>History (re-verifies and commits of this pair)</caption>
<thead><tr><th scope="col">When</th><th scope="col">From</th><th scope="col">Outcome</th><th scope="col">Why</th></tr>\
</thead>
<tbody>${r.attempts.map(
    (a) =>
      html`<tr><td data-label="When">${when(a.at)}</td><td data-label="From">${a.source}</td><td \
data-label="Outcome">${a.outcome}</td>\
<td data-label="Why">${a.reasonCode ? html`<code>${a.reasonCode}</code> ` : ''}${a.reason}</td></tr>`,
  )}</tbody>
</table>`;
}

const STATUSES = ['open', 'resolved', 'dismissed'] as const;

/** The inbox: a filter, the reviews, and the next page. */
export function reviewsInbox(
  list: ReviewList,
  filter: ReviewFilter,
  viewer: Operator,
  back: string,
  merchantRefs?: readonly string[],
): Html {
  const next = new URLSearchParams();
  if (filter.status) next.set('status', filter.status);
  if (filter.merchant) next.set('merchant', filter.merchant);
  if (filter.merchantOrderNo) next.set('merchantOrderNo', filter.merchantOrderNo);
  if (list.nextBefore !== null) next.set('before', String(list.nextBefore));
  return html`<h1>Reviews</h1>
<p class="muted">Callbacks that failed verification and credited nothing. Re-verify asks Get order again and credits \
once if it now confirms; dismiss closes a review without crediting.</p>
<form class="inline" method="get" action="/reviews" role="search">
<label>Status <select name="status">${STATUSES.map(
    (s) => html`<option value="${s}"${filter.status === s ? html` selected` : ''}>${s}</option>`,
  )}</select></label>
${merchantField(merchantRefs, filter.merchant)}<label>Merchant order no. <input name="merchantOrderNo" \
value="${filter.merchantOrderNo ?? ''}" size="20"></label>
<button type="submit">Filter</button>
</form>
${
  list.reviews.length === 0
    ? html`<p>No ${filter.status ?? ''} reviews${
        filter.merchantOrderNo ? html` for ${filter.merchantOrderNo}` : ''
      }.</p>`
    : list.reviews.map((r) => reviewCard(r, viewer, back))
}
${
  list.nextBefore !== null ? html`<p class="pager"><a href="/reviews?${next.toString()}">Older reviews →</a></p>` : ''
}`;
}
