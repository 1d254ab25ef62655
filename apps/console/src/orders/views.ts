import type { Operator } from '../operators/operator.ts';
import { can } from '../operators/roles.ts';
import type { ReviewView } from '../reviews/queries.ts';
import { reviewCard } from '../reviews/views.ts';
import { amountText, status, when } from '../web/format.ts';
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
  'differs-from-applied': 'suspected forgery: differs from what was applied',
  'contradicts-get-order': 'suspected forgery: contradicts Get order',
  'operator-action': 'operator action',
  note: 'note: differs in what Get order does not confirm',
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
  'contradicts-get-order': 'failed',
  'operator-action': 'neutral',
  note: 'neutral',
};

/** The timeline as a table, oldest first: what arrived, each attempt, and what it did to the ledger. */
export function timelineTable(entries: readonly TimelineEntry[]): Html {
  if (entries.length === 0) return html`<p>No callback for this order has been recorded yet.</p>`;
  return html`<table class="stack"><caption class="muted">Oldest first. Times in UTC.</caption>
<thead><tr><th scope="col">When</th><th scope="col">What</th><th scope="col">Platform order · state</th><th \
scope="col">Job · attempt</th><th scope="col">Code</th><th scope="col">Detail</th></tr></thead>
<tbody>${entries.map(
    (e) => html`<tr><td data-label="When" class="mono">${when(e.at)}</td><td data-label="What"><span class="status \
status-${TONE[e.event]}">${EVENT_LABELS[e.event] ?? e.event}</span></td>
<td data-label="Platform order · state" class="mono">${e.orderNo ?? '—'}${
      e.state !== null ? html` · ${e.state}` : ''
    }</td><td data-label="Job · attempt" class="mono">${
      e.jobId ? html`<a href="/queues/queue/callbacks/${encodeURIComponent(e.jobId)}">${e.jobId}</a>` : '—'
    }${e.attempt !== null ? html` · #${e.attempt}` : ''}</td>
<td data-label="Code">${e.code ? html`<code>${e.code}</code>` : ''}</td><td data-label="Detail">${e.detail}${
      e.link ? html` <a href="${e.link}">${e.source === 'replay' ? 'the replay' : 'audit'}</a>` : ''
    }</td></tr>`,
  )}</tbody></table>`;
}

/** The platform's number: ours once a callback applied, else the one its callbacks name (not applied yet). */
function platformOrderOf(o: OrderDetail): Html | string {
  if (o.platformOrderNo) return o.platformOrderNo;
  const named = [...new Set(o.timeline.map((e) => e.orderNo).filter((n): n is string => !!n))];
  if (named.length === 0) return o.callbacksKnown === 'all' ? 'not known yet (no callback arrived)' : 'not known yet';
  return html`${named.join(', ')} <span class="muted">(named by its callbacks; none applied yet)</span>`;
}

/** Why the ledger is empty, in the order's own terms: a succeeded payout posts nothing, and that is its success. */
function nothingPosted(o: OrderDetail): string {
  if (o.kind === 'payin')
    return o.status === 'pending' ? 'Nothing posted: not credited yet.' : `Nothing posted (the pay-in is ${o.status}).`;
  if (o.status === 'succeeded')
    return 'Nothing posted: the payout succeeded (a succeeded payout posts no entry; a refused one posts its refund).';
  return o.status === 'pending'
    ? 'Nothing posted: the payout is not finalised yet.'
    : `Nothing posted (the payout is ${o.status}).`;
}

/** The last entry of `events`, newest first. */
const lastOf = (o: OrderDetail, events: readonly TimelineEntry['event'][]) =>
  o.timeline.findLast((e) => events.includes(e.event));

/**
 * One line to tell the customer, from the order's state and its story: "credited at …", "refunded at …", "under
 * review since …", "waiting for the platform since …", "a callback failed for good …", "no callback yet".
 */
export function customerLine(o: OrderDetail): string {
  const posted = o.ledger.at(-1)?.createdAt ?? lastOf(o, ['applied'])?.at;
  const at = posted ? ` at ${when(posted)}` : '';
  const entry = o.ledger.at(-1);
  if (o.status === 'credited')
    return `Credited${at}: ${entry ? `${amountText(entry.amount)} ${entry.currency}` : `${amountText(o.amount)} ${o.currency}`}.`;
  if (o.status === 'succeeded')
    return `Paid out${at}: the platform confirmed the payout of ${amountText(o.amount)} ${o.currency}.`;
  if (o.status === 'refused')
    return o.kind === 'payout'
      ? `Refused by the platform; refunded${at}.`
      : `Refused by the platform${at}; nothing credited.`;
  if (o.review)
    return `Under review since ${when(o.review.at)}: nothing ${o.kind === 'payin' ? 'credited' : 'finalised'} until an \
operator settles it.`;
  const failed = o.jobs.filter((j) => j.state === 'failed');
  if (failed.length > 0)
    return `Not ${o.kind === 'payin' ? 'credited' : 'finalised'} yet: the platform's callback failed for \
good${lastOf(o, ['job-failed']) ? ` at ${when(lastOf(o, ['job-failed'])!.at)}` : ''} and waits for an operator to \
replay it.`;
  const first = o.timeline.find((e) => e.event === 'received');
  if (first)
    return `Waiting for the platform since ${when(first.at)}: its callback arrived, Get order has not confirmed it \
yet.`;
  if (o.callbacksKnown !== 'all')
    return `No callback for this order is listed yet, and the lists cannot tell whether \
one arrived: ${UNKNOWN_WHY[o.callbacksKnown]}. Look again in a few seconds.`;
  return `Waiting for the platform: no callback for this order has arrived yet.`;
}

/** Why an empty timeline cannot mean that no callback arrived. */
const UNKNOWN_WHY: Record<Exclude<OrderDetail['callbacksKnown'], 'all'>, string> = {
  'lists-behind-queue':
    'the queue holds callbacks the lists have no row for yet (rows are written within seconds of a database outage ' +
    'ending; a callback no worker has taken yet has none)',
  'queue-unreadable': 'the queue could not be read',
};

/** "Replay this job" for each failed job of the order, with a reason (role operator; a viewer sees none). */
function replayForms(o: OrderDetail, viewer: Operator): Html | string {
  const failed = o.jobs.filter((j) => j.state === 'failed');
  if (failed.length === 0) return '';
  if (!can(viewer.role, 'queue.retry'))
    return html`<p class="muted">${failed.length} job(s) of this order failed for good; replaying needs the role \
operator (you are ${viewer.role}).</p>`;
  return html`<div class="actions">${failed.map(
    (j) => html`<form class="inline" method="post" \
action="/orders/${encodeURIComponent(o.merchantOrderNo)}/jobs/${encodeURIComponent(j.jobId)}/replay">
<label>Why replay job <span class="mono">${j.jobId}</span> (failed after ${j.attemptsMade} attempts)? <input \
name="reason" required maxlength="2000" size="40" placeholder="e.g. platform back up after the outage"></label>
<button class="primary" type="submit">Replay this job</button></form>`,
  )}</div>`;
}

/** The order page: facts and amounts, the ledger, its reviews (with their actions), and the timeline. */
export function orderPage(o: OrderDetail, openReviews: readonly ReviewView[], viewer: Operator, back: string): Html {
  return html`<h1>Order <span class="mono">${o.merchantOrderNo}</span> ${status(o.status)}</h1>
<p class="customer-line" id="customer-line"><strong>For the customer:</strong> ${customerLine(o)}</p>
<dl class="facts">
${o.merchant ? html`<dt>Merchant</dt><dd class="mono">${o.merchant}</dd>` : ''}<dt>Kind</dt><dd>${o.kind}</dd>
<dt>Amount</dt><dd class="mono">${amountText(o.amount)} ${o.currency}</dd>
<dt>Platform order</dt><dd class="mono">${platformOrderOf(o)}</dd>
<dt>Customer</dt><dd class="mono">${o.customerId ?? '—'}</dd>
<dt>Open review</dt><dd>${o.review ? html`${o.review.reason} (since ${when(o.review.at)})` : 'none'}</dd>
</dl>
<h2>Ledger</h2>
${
  o.ledger.length === 0
    ? html`<p>${nothingPosted(o)}</p>`
    : html`<table class="stack"><thead><tr><th scope="col">Entry</th><th scope="col" class="num">Amount</th><th \
scope="col">Currency</th><th scope="col">Posted</th></tr></thead>
<tbody>${o.ledger.map(
        (l) => html`<tr><td data-label="Entry">${l.entryType}</td><td data-label="Amount" class="num \
mono">${amountText(l.amount)}</td><td data-label="Currency">${l.currency}</td><td data-label="Posted" \
class="mono">${when(l.createdAt)}</td></tr>`,
      )}</tbody></table>`
}
${openReviews.length > 0 ? html`<h2>Open reviews</h2>${openReviews.map((r) => reviewCard(r, viewer, back))}` : ''}
<h2>Timeline</h2>
${replayForms(o, viewer)}
${timelineTable(o.timeline)}
<p><a href="/reviews?status=resolved&amp;merchantOrderNo=${encodeURIComponent(o.merchantOrderNo)}">Closed reviews of \
this order</a> · <a href="/audit?target=${encodeURIComponent(`order:${o.merchantOrderNo}`)}">Audit of this order</a>\
</p>`;
}

/** A number several merchants hold, opened without naming one: each merchant's order, a link to it. */
export function orderCandidatesPage(merchantOrderNo: string, refs: readonly string[]): Html {
  return html`<h1>Order <span class="mono">${merchantOrderNo}</span></h1>
<p role="status">${refs.length} merchants hold this order number. Which one?</p>
<ul>${refs.map(
    (ref) =>
      html`<li><a href="/orders/${encodeURIComponent(merchantOrderNo)}?merchant=${encodeURIComponent(ref)}">${merchantOrderNo}</a> of merchant <span class="mono">${ref}</span></li>`,
  )}</ul>`;
}
