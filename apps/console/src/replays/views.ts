/**
 * The replay wizard's views: filter → dry-run table → reason and rate → start → progress → cancel. Typed
 * functions of the view models the API serves (ReplayPlan, ReplayView); every value is escaped by `html`.
 */
import type { CallbackFilter } from '../callbacks/queries.ts';
import { html, type Html } from '../web/html.ts';
import { PLAN_CLASSES, type PlanClass, type ReplayPlan } from './plan.ts';
import type { ReplayView } from './queries.ts';

const CLASS_LABELS: Record<PlanClass, { label: string; help: string }> = {
  willApply: { label: 'Will apply', help: 'Get order confirms it: replaying credits (or finalises) the order once' },
  alreadyApplied: { label: 'Already applied', help: 'its receipt exists or the order is already final: replaying is a no-op' },
  willReview: { label: 'Will go to review', help: 'verification fails (amount, order, state): replaying opens a review, pays nothing' },
  stillPending: { label: 'Still pending', help: 'Get order does not confirm a final state (or did not answer): replaying now ends in review' },
  notReplayable: { label: 'Not replayable', help: 'no longer in the queue, or no longer failed' },
};

/** The filter fields a replay takes (status is always "failed"). */
export interface FilterForm {
  values: Partial<Record<keyof CallbackFilter, string>>;
}

const field = (name: keyof CallbackFilter, label: string, value: string | undefined, extra: Html | string = '') =>
  html`<label>${label}<input name="${name}" value="${value ?? ''}" ${extra}></label>`;

/** The filter form; GET, so a dry run's address can be shared and reloaded. */
export function filterFormView(form: FilterForm): Html {
  const v = form.values;
  return html`<form class="inline" method="get" action="/replays/new" aria-label="Replay filter">
${field('merchantOrderNo', 'Merchant order no.', v.merchantOrderNo)}
${field('orderNo', 'Platform order no.', v.orderNo)}
<label>Kind<select name="kind"><option value="">any</option>${(['payin', 'payout'] as const).map((k) => html`<option value="${k}"${v.kind === k ? html` selected` : ''}>${k}</option>`)}</select></label>
${field('code', 'Last error code', v.code, html`placeholder="PLATFORM_HTTP_ERROR"`)}
${field('amountMin', 'Amount from', v.amountMin, html`inputmode="decimal" size="8"`)}
${field('amountMax', 'Amount to', v.amountMax, html`inputmode="decimal" size="8"`)}
${field('from', 'Received from (UTC)', v.from, html`placeholder="2026-11-24T08:00:00Z"`)}
${field('to', 'Received before (UTC)', v.to, html`placeholder="2026-11-24T12:00:00Z"`)}
<input type="hidden" name="dryRun" value="1">
<button type="submit" class="primary">Dry run</button>
</form>
<p class="muted">A replay re-runs the jobs that <strong>failed for good</strong> among the callbacks this filter matches. The dry run changes nothing.</p>`;
}

/** The dry run's result, then (for those who may) the start form with the reason and the rate. */
export function planView(vm: { plan: ReplayPlan; filter: CallbackFilter; canStart: boolean; defaultRate: number; maxRate: number }): Html {
  const { plan } = vm;
  const rows = PLAN_CLASSES.map(
    (c) => html`<tr><th scope="row">${CLASS_LABELS[c].label}</th><td class="num" data-class="${c}">${plan.counts[c]}</td><td class="muted">${CLASS_LABELS[c].help}</td></tr>`,
  );
  const samples = PLAN_CLASSES.filter((c) => plan.samples[c].length > 0).map(
    (c) => html`<h3>${CLASS_LABELS[c].label}: e.g.</h3>
<table><thead><tr><th>Merchant order</th><th>Platform order</th><th>Kind</th><th class="num">Amount</th><th>Code</th><th>Why</th></tr></thead><tbody>
${plan.samples[c].map((s) => html`<tr><td><a href="/orders/${encodeURIComponent(s.merchantOrderNo)}">${s.merchantOrderNo}</a></td><td class="mono">${s.orderNo}</td><td>${s.kind}</td><td class="num">${s.amount ?? '-'}</td><td class="mono">${s.code ?? ''}</td><td>${s.detail}</td></tr>`)}
</tbody></table>`,
  );
  const hidden = Object.entries(vm.filter)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => html`<input type="hidden" name="${k}" value="${String(v)}">`);
  const replayable = plan.matched - plan.counts.notReplayable;
  return html`<section class="card" aria-labelledby="plan-h"><h2 id="plan-h">Dry run: ${plan.matched} failed job(s) match</h2>
${plan.classified < plan.matched ? html`<p class="muted">The first ${plan.classified} (by job id) are classified; a replay still covers all ${plan.matched}.</p>` : ''}
<table class="plan"><thead><tr><th>What replaying would do</th><th class="num">Jobs</th><th></th></tr></thead><tbody>${rows}</tbody></table>
${samples}
</section>
${
  !vm.canStart
    ? html`<p class="muted">Your role may not start a replay.</p>`
    : plan.matched === 0
      ? html`<p class="muted">Nothing to replay.</p>`
      : html`<form class="card" method="post" action="/replays" aria-labelledby="start-h"><h2 id="start-h">Start the replay</h2>
${hidden}
<label>Reason (required, kept in the audit trail)<textarea name="reason" required rows="2" cols="60"></textarea></label>
<label>Jobs per second (at most ${vm.maxRate})<input name="ratePerSecond" type="number" min="1" max="${vm.maxRate}" value="${vm.defaultRate}" required></label>
<p><button type="submit" class="primary">Start replay of ${replayable} job(s)</button></p>
</form>`
}`;
}

const pct = (r: ReplayView) => (r.total === 0 ? 100 : Math.round(((r.replayed + r.skipped) / r.total) * 100));

/** One replay's progress; refreshes itself every two seconds while it runs; the cancel form for those who may. */
export function progressView(vm: { replay: ReplayView; canCancel: boolean }): Html {
  const r = vm.replay;
  const running = r.status === 'running';
  const filter = Object.entries(r.filter)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `${k}=${String(v)}`)
    .join(', ');
  return html`${running ? html`<meta http-equiv="refresh" content="2">` : ''}
<section class="card" aria-labelledby="progress-h"><h2 id="progress-h">Replay ${r.id}: <span class="status status-${r.status}" data-status="${r.status}">${r.status}</span></h2>
<p><progress max="100" value="${pct(r)}" aria-label="Progress">${pct(r)} %</progress> <span data-progress>${r.replayed + r.skipped} of ${r.total}</span></p>
<dl class="facts">
<dt>Sent back</dt><dd data-replayed>${r.replayed}</dd>
<dt>Skipped</dt><dd>${r.skipped} <span class="muted">(no longer failed, or gone from the queue)</span></dd>
<dt>Remaining</dt><dd>${r.remaining}</dd>
<dt>Rate</dt><dd>${r.ratePerSecond} per second</dd>
<dt>Filter</dt><dd class="mono">${filter || 'all failed jobs'}</dd>
<dt>Started by</dt><dd>${r.operator}, ${r.createdAt}</dd>
<dt>Reason</dt><dd>${r.reason}</dd>
${r.finishedAt ? html`<dt>Ended</dt><dd>${r.finishedAt}</dd>` : ''}
${r.error ? html`<dt>Last error</dt><dd class="status-failed">${r.error}</dd>` : ''}
</dl>
${running ? html`<p class="muted">This page refreshes every 2 seconds. The jobs sent back run through the worker; see each in <a href="/search">Search</a> or on <a href="/queues">the dashboard</a>.</p>` : ''}
</section>
${
  running && vm.canCancel
    ? html`<form class="card" method="post" action="/replays/${r.id}/cancel" aria-labelledby="cancel-h"><h2 id="cancel-h">Cancel</h2>
<p class="muted">No further job is sent back (within a second); those already sent back run to their end.</p>
<label>Reason (required)<textarea name="reason" required rows="2" cols="60"></textarea></label>
<p><button type="submit" class="danger">Cancel replay ${r.id}</button></p></form>`
    : ''
}`;
}

/** The replays, newest first, and the way to a new one. */
export function listView(vm: { replays: ReplayView[]; canPlan: boolean }): Html {
  return html`${vm.canPlan ? html`<p><a href="/replays/new">New replay by filter…</a></p>` : ''}
${
  vm.replays.length === 0
    ? html`<p class="muted">No replay yet.</p>`
    : html`<table><thead><tr><th>Replay</th><th>Status</th><th class="num">Sent back</th><th class="num">Total</th><th class="num">Rate</th><th>By</th><th>Reason</th><th>Started</th></tr></thead><tbody>
${vm.replays.map((r) => html`<tr><td><a href="/replays/${r.id}">Replay ${r.id}</a></td><td><span class="status status-${r.status}">${r.status}</span></td><td class="num">${r.replayed}</td><td class="num">${r.total}</td><td class="num">${r.ratePerSecond}/s</td><td>${r.operator}</td><td>${r.reason}</td><td>${r.createdAt}</td></tr>`)}
</tbody></table>`
}`;
}
