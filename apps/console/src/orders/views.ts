import type { Operator } from '../operators/operator.ts';
import type { ReviewView } from '../reviews/queries.ts';
import { reviewCard } from '../reviews/views.ts';
import { status, when } from '../web/format.ts';
import { html, type Html } from '../web/html.ts';
import type { OrderDetail } from './queries.ts';
import type { TimelineEntry } from './timeline.ts';

const EVENT_LABELS: Record<TimelineEntry['event'], string> = {
  received: 'callback received',
  'received-again': 'same callback again',
  'attempt-waiting': 'attempt: waiting',
  'attempt-failed': 'attempt failed',
  'attempt-settled': 'attempt settled it',
  'job-failed': 'job failed for good',
  replayed: 'replayed',
  applied: 'applied (receipt)',
  'ledger-entry': 'ledger entry',
  'review-opened': 'review opened',
  'review-closed': 'review closed',
  'differs-from-applied': 'differs from what was applied',
};

/** How each event reads at a glance: what went wrong in red, money posted in green, the rest neutral. */
const TONE: Record<TimelineEntry['event'], string> = {
  received: 'neutral',
  'received-again': 'neutral',
  'attempt-waiting': 'waiting',
  'attempt-failed': 'failed',
  'attempt-settled': 'neutral',
  'job-failed': 'failed',
  replayed: 'neutral',
  applied: 'applied',
  'ledger-entry': 'credited',
  'review-opened': 'review',
  'review-closed': 'resolved',
  'differs-from-applied': 'failed',
};

/** The timeline as a table, oldest first: what arrived, each attempt, and what it did to the ledger. */
export function timelineTable(entries: readonly TimelineEntry[]): Html {
  if (entries.length === 0) return html`<p>No callback for this order has been recorded yet.</p>`;
  return html`<table class="stack"><caption class="muted">Oldest first. Times in UTC.</caption>
<thead><tr><th scope="col">When</th><th scope="col">What</th><th scope="col">Platform order · state</th><th scope="col">Job · attempt</th><th scope="col">Code</th><th scope="col">Detail</th></tr></thead>
<tbody>${entries.map(
    (e) => html`<tr><td data-label="When" class="mono">${when(e.at)}</td><td data-label="What"><span class="status status-${TONE[e.event]}">${EVENT_LABELS[e.event] ?? e.event}</span></td>
<td data-label="Platform order · state" class="mono">${e.orderNo ?? '—'}${e.state !== null ? html` · ${e.state}` : ''}</td><td data-label="Job · attempt" class="mono">${e.jobId ? html`<a href="/queues/queue/callbacks/${encodeURIComponent(e.jobId)}">${e.jobId}</a>` : '—'}${e.attempt !== null ? html` · #${e.attempt}` : ''}</td>
<td data-label="Code">${e.code ? html`<code>${e.code}</code>` : ''}</td><td data-label="Detail">${e.detail}</td></tr>`,
  )}</tbody></table>`;
}

/** The platform's number: ours once a callback applied, else the one its callbacks name (not applied yet). */
function platformOrderOf(o: OrderDetail): Html | string {
  if (o.platformOrderNo) return o.platformOrderNo;
  const named = [...new Set(o.timeline.map((e) => e.orderNo).filter((n): n is string => !!n))];
  return named.length === 0 ? 'not known yet (no callback arrived)' : html`${named.join(', ')} <span class="muted">(named by its callbacks; none applied yet)</span>`;
}

/** Why the ledger is empty, in the order's own terms: a succeeded payout posts nothing, and that is its success. */
function nothingPosted(o: OrderDetail): string {
  if (o.kind === 'payin') return o.status === 'pending' ? 'Nothing posted: not credited yet.' : `Nothing posted (the pay-in is ${o.status}).`;
  if (o.status === 'succeeded') return 'Nothing posted: the payout succeeded (a succeeded payout posts no entry; a refused one posts its refund).';
  return o.status === 'pending' ? 'Nothing posted: the payout is not finalised yet.' : `Nothing posted (the payout is ${o.status}).`;
}

/** The order page: facts and amounts, the ledger, its reviews (with their actions), and the timeline. */
export function orderPage(o: OrderDetail, openReviews: readonly ReviewView[], viewer: Operator, back: string): Html {
  return html`<h1>Order <span class="mono">${o.merchantOrderNo}</span> ${status(o.status)}</h1>
<dl class="facts">
<dt>Kind</dt><dd>${o.kind}</dd>
<dt>Amount</dt><dd class="mono">${o.amount} ${o.currency}</dd>
<dt>Platform order</dt><dd class="mono">${platformOrderOf(o)}</dd>
<dt>Open review</dt><dd>${o.review ? html`${o.review.reason} (since ${when(o.review.at)})` : 'none'}</dd>
</dl>
<h2>Ledger</h2>
${o.ledger.length === 0
    ? html`<p>${nothingPosted(o)}</p>`
    : html`<table class="stack"><thead><tr><th scope="col">Entry</th><th scope="col" class="num">Amount</th><th scope="col">Currency</th><th scope="col">Posted</th></tr></thead>
<tbody>${o.ledger.map((l) => html`<tr><td data-label="Entry">${l.entryType}</td><td data-label="Amount" class="num mono">${l.amount}</td><td data-label="Currency">${l.currency}</td><td data-label="Posted" class="mono">${when(l.createdAt)}</td></tr>`)}</tbody></table>`}
${openReviews.length > 0 ? html`<h2>Open reviews</h2>${openReviews.map((r) => reviewCard(r, viewer, back))}` : ''}
<h2>Timeline</h2>
${timelineTable(o.timeline)}
<p><a href="/reviews?status=resolved&amp;merchantOrderNo=${encodeURIComponent(o.merchantOrderNo)}">Closed reviews of this order</a> · <a href="/audit?target=${encodeURIComponent(`order:${o.merchantOrderNo}`)}">Audit of this order</a></p>`;
}
