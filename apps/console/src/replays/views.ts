/**
 * The replay wizard's views: filter → dry-run table → reason and rate → start → progress → cancel. Typed
 * functions of the view models the API serves (ReplayPlan, ReplayView); every value is escaped by `html`.
 */
import { filterParams, type FILTER_FIELDS } from '../callbacks/form.ts';
import { listOf, type CallbackFilter } from '../callbacks/queries.ts';
import { amountText, orderHref, when } from '../web/format.ts';
import { html, type Html } from '../web/html.ts';
import { merchantField } from '../web/merchant-field.ts';
import type { ReplayOutcomeRow } from './outcomes.ts';
import { PLAN_CLASSES, type PlanClass, type ReplayPlan } from './plan.ts';
import { amounts, money, OUTCOME_WORDS, planSentence } from './words.ts';
import type { ReplayView } from './queries.ts';

export { planSentence } from './words.ts';

const CLASS_LABELS: Record<PlanClass, { label: string; help: string }> = {
  willApply: { label: 'Will apply', help: 'Get order confirms it: replaying credits (or finalises) the order once' },
  alreadyApplied: {
    label: 'Already applied',
    help: 'its receipt exists or the order is already final: replaying is a no-op',
  },
  willReview: {
    label: 'Will go to review',
    help: 'verification fails (amount, order, state): replaying opens a review, pays nothing',
  },
  stillPending: {
    label: 'Back to retrying',
    help:
      'Get order does not confirm it yet (or did not answer): replaying sends it back to retrying with a fresh ' +
      'retry budget; it is credited once the platform confirms, or fails again when the budget runs out',
  },
  willFailAgain: {
    label: 'Will fail again',
    help:
      'Get order does not answer (or fails in a way no retry fixes) and the job has no attempt after this one ' +
      '(CALLBACK_JOB_ATTEMPTS=1): replaying fails it again at once',
  },
  notReplayable: { label: 'Not replayable', help: 'no longer in the queue, or no longer failed' },
};

/** The filter fields the wizard shows, as typed. */
export interface FilterForm {
  values: Partial<Record<(typeof FILTER_FIELDS)[number], string>>;
}

const field = (name: string, label: string, value: string | undefined, extra: Html | string = '') =>
  html`<label>${label}<input name="${name}" value="${value ?? ''}" autocomplete="off" ${extra}></label>`;

/** The filter form; GET, so a dry run's address can be shared and reloaded. Codes: several, comma-separated. */
export function filterFormView(form: FilterForm): Html {
  const v = form.values;
  return html`<h1>New replay</h1>
<form class="inline" method="get" action="/replays/new" aria-label="Replay filter">
${field(
  'code',
  'Last error codes (any of; comma-separated)',
  v.code,
  html`size="40" placeholder="e.g. two codes, comma-separated"`,
)}
<label>Kind<select name="kind"><option value="">any</option>${(['payin', 'payout'] as const).map(
    (k) => html`<option value="${k}"${v.kind === k ? html` selected` : ''}>${k}</option>`,
  )}</select></label>
${field('merchantOrderNo', 'Merchant order no.', v.merchantOrderNo, html`placeholder="exact"`)}
${field('orderNo', 'Platform order no.', v.orderNo, html`placeholder="exact"`)}
${field('amountMin', 'Amount from', v.amountMin, html`inputmode="decimal" size="8" placeholder="decimal"`)}
${field('amountMax', 'Amount to', v.amountMax, html`inputmode="decimal" size="8" placeholder="decimal"`)}
${field('from', 'Received from (UTC)', v.from, html`placeholder="YYYY-MM-DD HH:MM"`)}
${field('to', 'Received before (UTC)', v.to, html`placeholder="YYYY-MM-DD HH:MM"`)}
<input type="hidden" name="dryRun" value="1">
<button type="submit" class="primary">Dry run</button>
</form>
<p class="muted">A replay re-runs the jobs that <strong>failed for good</strong> among the callbacks this filter \
matches. The dry run changes nothing. To pick them from a list, use <a href="/callbacks?status=failed">Callbacks › \
Failed</a>.</p>`;
}

/** The dry run's result, then (for those who may) the start form with the reason and the rate. */
export function planView(vm: {
  plan: ReplayPlan;
  filter: CallbackFilter;
  canStart: boolean;
  defaultRate: number;
  maxRate: number;
  /** The cancelled replay this dry run is the rest of ("Dry run the rest"), if any. */
  rest?: ReplayView;
}): Html {
  const { plan } = vm;
  const rows = PLAN_CLASSES.map((c) => {
    const money = amounts(plan.totals.filter((t) => t.cls === c));
    return html`<tr><th scope="row">${CLASS_LABELS[c].label}</th><td class="num" \
data-class="${c}">${plan.counts[c]}</td><td class="num mono" data-amount="${c}">${money || '—'}</td><td \
class="muted">${CLASS_LABELS[c].help}</td></tr>`;
  });
  const samples = PLAN_CLASSES.filter((c) => plan.samples[c].length > 0).map(
    (c) => html`<h3>${CLASS_LABELS[c].label}: e.g.</h3>
<table class="stack"><thead><tr><th>Merchant order</th><th>Platform order</th><th>Kind</th><th class="num">Amount</th>\
<th>Code</th><th>Why</th></tr></thead><tbody>
${plan.samples[c].map(
  (s) => html`<tr><td data-label="Merchant order"><a href="${orderHref(s.merchantOrderNo)}">${s.merchantOrderNo}</a>\
</td><td data-label="Platform order" class="mono">${s.orderNo}</td><td data-label="Kind">${s.kind}</td><td \
data-label="Amount" class="num">${s.amount === null ? '-' : amountText(s.amount)}</td><td data-label="Code" class="mono">${s.code ?? ''}</td><td \
data-label="Why">${s.detail}</td></tr>`,
)}
</tbody></table>`,
  );
  const hidden = [...filterParams(vm.filter)].map(([k, v]) => html`<input type="hidden" name="${k}" value="${v}">`);
  // What this dry run classified goes back with the start, which acts on that set only (or says it changed).
  const posted = JSON.stringify({ bound: plan.bound, counts: plan.counts, totals: plan.totals });
  const replayable = plan.classified - plan.counts.notReplayable;
  const rest = vm.rest;
  const reason = rest ? `${rest.reason} (the rest of replay ${rest.id})` : '';
  return html`<section class="card" aria-labelledby="plan-h"><h2 id="plan-h">Dry run: ${plan.matched} failed job(s) \
match</h2>
<p class="summary" data-plan-summary><strong>${planSentence(plan)}</strong></p>
${
  plan.classified < plan.matched
    ? html`<p class="muted">The first ${plan.classified} (by job id) are classified; a replay started from this dry \
run covers those ${plan.classified} only. Dry run again for the rest.</p>`
    : ''
}
<p class="muted" data-plan-bound>A replay started from this dry run sends back these ${plan.bound.jobs} job(s) only: \
jobs that fail after it (${when(plan.bound.asOf)}) are not swept in.</p>
<table class="plan stack"><thead><tr><th>What replaying would do</th><th class="num">Jobs</th><th \
class="num">Amount</th><th></th></tr></thead><tbody>${rows}</tbody></table>
${samples}
</section>
${
  !vm.canStart
    ? html`<p class="muted">Your role may not start a replay.</p>`
    : plan.matched === 0
      ? html`<p class="muted">Nothing to replay.</p>`
      : html`<form class="card" method="post" action="/replays" aria-labelledby="start-h"><h2 id="start-h">Start the \
replay</h2>
${hidden}<input type="hidden" name="plan" value="${posted}">
${
  rest
    ? html`<p data-rest-of="${rest.id}">The rest of <a href="/replays/${rest.id}">replay ${rest.id}</a>, cancelled by \
${rest.endedBy ?? 'someone'}: ${rest.endReason ?? '—'}</p>`
    : ''
}
<p>${planSentence(plan)} Jobs sent back run through the worker and its checks, as any attempt: nothing is credited \
twice.</p>
<label>Reason (required, kept in the audit trail)<textarea name="reason" required rows="2" cols="60">${reason}\
</textarea></label>
<label>Jobs per second (at most ${vm.maxRate})<input name="ratePerSecond" type="number" min="1" max="${vm.maxRate}" \
value="${vm.defaultRate}" required></label>
<p><button type="submit" class="primary">Start replay of ${replayable} job(s)</button></p>
</form>`
}`;
}

/** Who cancelled a replay and why, for every operator to read (the audit is the admins'). */
function endedBy(r: ReplayView): Html | string {
  if (r.status !== 'cancelled') return '';
  return html`<dt>Cancelled by</dt><dd data-ended-by>${r.endedBy ?? 'unknown (before this was kept)'}</dd>
<dt>Why cancelled</dt><dd data-end-reason>${r.endReason ?? '—'}</dd>`;
}

const pct = (r: ReplayView) => (r.total === 0 ? 100 : Math.round(((r.replayed + r.skipped) / r.total) * 100));

const filterText = (f: CallbackFilter) =>
  Object.entries(f)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `${k}=${listOf(v as string | string[]).join(',')}`)
    .join(', ');

/** What became of the jobs sent back: "38 credited, 36,790.00 INR · 3 failed again · 5 queued or retrying". */
export function outcomesList(outcomes: readonly ReplayOutcomeRow[]): Html {
  if (outcomes.length === 0) return html`<span class="muted">none sent back yet</span>`;
  return html`${outcomes.map(
    (o, i) =>
      html`${i > 0 ? ' · ' : ''}<span data-outcome="${o.outcome}">\
<strong>${o.jobs}</strong> ${OUTCOME_WORDS[o.outcome]}${o.currency && o.amount !== '0' ? `, ${money(o)}` : ''}</span>`,
  )}`;
}

/**
 * One replay's progress. While it runs, a small script (/assets/replay-progress.js, allowed by the page's CSP)
 * polls GET /api/replays/{id} and updates the counters in place: the page never reloads, so a cancel reason being
 * typed stays, and so does the focus. Without script the page still works (reload it by hand).
 */
export function progressView(vm: { replay: ReplayView; canCancel: boolean; canPlan: boolean }): Html {
  const r = vm.replay;
  const running = r.status === 'running';
  const filter = filterText(r.filter);
  const rest = `/replays/new?${filterParams(r.filter, { dryRun: '1', rest: String(r.id) }).toString()}`;
  return html`<h1>Replay ${r.id}</h1>
<section class="card" aria-labelledby="progress-h"${
    running ? html` data-replay-id="${r.id}" data-poll-ms="2000"` : ''
  }><h2 id="progress-h">Progress: <span class="status status-${r.status}" data-status="${r.status}">${r.status}</span>\
</h2>
<p><progress max="100" value="${pct(r)}" aria-label="Progress" data-field="pct">${pct(r)} %</progress> <span \
data-progress>${r.replayed + r.skipped} of ${r.total}</span></p>
<dl class="facts">
<dt>Sent back</dt><dd data-replayed>${r.replayed}</dd>
<dt>Skipped</dt><dd><span data-skipped>${r.skipped}</span> <span class="muted">(no longer failed, or gone from the \
queue)</span></dd>
<dt>Remaining</dt><dd data-remaining>${r.remaining}</dd>
<dt>What became of them</dt><dd data-outcomes>${outcomesList(r.outcomes)}</dd>
<dt>Rate</dt><dd>${r.ratePerSecond} per second</dd>
<dt>Filter</dt><dd class="mono">${filter || 'all failed jobs'}</dd>
<dt>Started by</dt><dd>${r.operator}, ${when(r.createdAt)}</dd>
<dt>Reason</dt><dd>${r.reason}</dd>
<dt>Ended</dt><dd data-ended>${r.finishedAt ? when(r.finishedAt) : '—'}</dd>
${endedBy(r)}
${r.error ? html`<dt>Last error</dt><dd class="status-failed">${r.error}</dd>` : ''}
</dl>
${
  running
    ? html`<p class="muted" data-live>These counters update every 2 seconds by themselves; nothing else on the page \
changes. The jobs sent back run through the worker; each is listed in <a \
href="/callbacks?${filterParams(r.filter).toString()}">Callbacks</a>.</p>`
    : ''
}
<p role="status" class="flash flash-ok" data-ended-note hidden>The replay has ended: reload the page for its last \
state.</p>
</section>
${
  running && vm.canCancel
    ? html`<form class="card" method="post" action="/replays/${r.id}/cancel" aria-labelledby="cancel-h"><h2 \
id="cancel-h">Cancel</h2>
<p class="muted">No further job is sent back (within a second); those already sent back run to their end.</p>
<label>Reason (required)<textarea name="reason" required rows="2" cols="60"></textarea></label>
<p><button type="submit" class="danger">Cancel replay ${r.id}</button></p></form>`
    : ''
}
${
  r.status === 'cancelled' && vm.canPlan && r.remaining > 0
    ? html`<section class="card" aria-labelledby="rest-h"><h2 id="rest-h">Replay the rest</h2>
<p>${r.remaining} job(s) were not sent back. A dry run of the same filter covers the failed jobs it still matches: \
those, and any that failed again.</p>
<p><a class="button primary" href="${rest}">Dry run the rest</a></p></section>`
    : ''
}
${running ? html`<script src="/assets/replay-progress.js" defer></script>` : ''}`;
}

/** The replays, newest first, with what became of their jobs, and the way to a new one. */
export function listView(vm: {
  replays: ReplayView[];
  canPlan: boolean;
  /** The merchant field: the refs it offers (none: one merchant, no field) and the one chosen. */
  merchant?: { refs: readonly string[] | undefined; chosen: string | undefined };
}): Html {
  // The merchant column once replays name one (two merchants or more: a replay by filter is per merchant).
  const named = vm.replays.some((r) => r.filter.merchant !== undefined);
  return html`<h1>Replays</h1>
<p class="muted">Each replay sends failed jobs back to the queue; "what became of them" is what the worker did with \
each, since. Times in UTC.</p>
${
  vm.merchant?.refs
    ? html`<form class="inline" method="get" action="/replays" role="search">\
${merchantField(vm.merchant.refs, vm.merchant.chosen)}<button type="submit">Filter</button></form>`
    : ''
}
${
  vm.canPlan
    ? html`<p><a href="/replays/new">New replay by filter…</a> · <a href="/callbacks?status=failed">Failed \
callbacks</a></p>`
    : ''
}
${
  vm.replays.length === 0
    ? html`<p class="muted">No replay yet.</p>`
    : html`<table class="stack"><thead><tr><th scope="col">Replay</th>${
        named ? html`<th scope="col">Merchant</th>` : ''
      }<th scope="col">Status</th><th scope="col" \
class="num">Sent back / total</th><th scope="col">What became of them</th><th scope="col">By</th><th \
scope="col">Reason</th><th scope="col">Started</th><th scope="col">Cancelled by, why</th></tr></thead><tbody>
${vm.replays.map(
  (r) => html`<tr><td data-label="Replay"><a href="/replays/${r.id}">Replay ${r.id}</a></td>${
    named ? html`<td data-label="Merchant">${r.filter.merchant ?? '—'}</td>` : ''
  }<td data-label="Status">\
<span class="status status-${r.status}">${r.status}</span></td><td data-label="Sent back / total" \
class="num">${r.replayed} / ${r.total}</td><td data-label="What became of them">${outcomesList(r.outcomes)}</td><td \
data-label="By">${r.operator}</td><td data-label="Reason">${r.reason}</td><td data-label="Started" \
class="mono">${when(r.createdAt)}</td><td data-label="Cancelled by, why" data-ended-by>${
    r.status === 'cancelled' ? `${r.endedBy ?? 'unknown'}: ${r.endReason ?? '—'}` : ''
  }</td></tr>`,
)}
</tbody></table>`
}`;
}
