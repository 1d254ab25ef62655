/**
 * The Callbacks page: presets, the filter, what can be done with what it matches (dry run and replay for failed
 * jobs, "run now" for jobs waiting out a backoff), and the matching callbacks a page at a time. Typed functions of
 * view models; every value is escaped by `html`.
 */
import type { Operator } from '../operators/operator.ts';
import { can } from '../operators/roles.ts';
import { amountText, orderHref, status, when } from '../web/format.ts';
import { html, type Html } from '../web/html.ts';
import { merchantField } from '../web/merchant-field.ts';
import { FORGERY_CODES, type QueueAgainstLists, type WaitingCounts } from './counts.ts';
import { filterParams, type FILTER_FIELDS } from './form.ts';
import { ARRIVAL_STATUSES, listOf, type ArrivalStatus, type CallbackFilter, type CallbackPage } from './queries.ts';
import { RUN_NOW_LIMIT, RUNNABLE } from './run-now.ts';

/** A named filter, one click away. */
export interface Preset {
  label: string;
  filter: CallbackFilter;
  help: string;
}

/** "Suspected forgeries": callbacks in review whose content contradicts Get order or a receipt, review open. */
const FORGERIES: CallbackFilter = { status: 'review', code: [...FORGERY_CODES], review: 'open' };

/**
 * The presets. "Suspected forgeries": callbacks in review whose content contradicts Get order or a receipt
 * (FORGERY_CODES) and whose review is open, as the landing counts them: a dismissed one has been handled (the filter's
 * "Review: closed" lists those).
 */
export const PRESETS: readonly Preset[] = [
  {
    label: 'Failed',
    filter: { status: 'failed' },
    help: 'failed for good: attempts used up, or a permanent error; kept 30 days for a replay',
  },
  {
    label: 'Retrying',
    filter: { status: 'retrying' },
    help: 'an attempt failed (platform or database away): will run again after its backoff',
  },
  {
    label: 'Waiting',
    filter: { status: 'waiting' },
    help: 'Get order not final yet, or the order not registered yet: asked again after a backoff',
  },
  {
    label: 'In review',
    filter: { status: 'review' },
    help: 'failed verification: credited nothing, waits for a person in Reviews',
  },
  {
    label: 'Suspected forgeries',
    filter: FORGERIES,
    help: 'in review because what they claim contradicts Get order or what was already applied, review open: nothing paid; dismiss the forged ones',
  },
];

/** The Suspected forgeries preset's link. */
export const FORGERIES_HREF = `/callbacks?${filterParams(FORGERIES).toString()}`;

const STATUS_HELP: Record<ArrivalStatus, string> = {
  active: 'an attempt runs now',
  waiting: 'waits for Get order or the order',
  retrying: 'will run again',
  failed: 'failed for good',
  applied: 'credited or finalised',
  duplicate: 'applied before: nothing done',
  review: 'failed verification',
};

/** "46 failed · 38 retrying · 2 waiting · 5 open reviews · 3 suspected forgeries", each a link to its list. */
export function countsLine(c: WaitingCounts): Html {
  const part = (n: number, word: string, href: string, key = word) =>
    html`<a href="${href}"><strong data-count="${key}">${n}</strong> ${word}</a>`;
  return html`<p class="counts" aria-label="What waits">${part(c.failed, 'failed', '/callbacks?status=failed')} \
· ${part(c.retrying, 'retrying', '/callbacks?status=retrying')} \
· ${part(c.waiting, 'waiting', '/callbacks?status=waiting')} \
· ${part(c.openReviews, c.openReviews === 1 ? 'open review' : 'open reviews', '/reviews')} \
· ${part(c.suspectedForgeries, c.suspectedForgeries === 1 ? 'suspected forgery' : 'suspected forgeries', FORGERIES_HREF, 'forgeries')}</p>`;
}

/**
 * Said when the queue's own counts and the lists' differ (or the queue cannot be read): the lists are not the whole
 * story then, and "0 retrying" may be wrong.
 */
export function queueAgainstListsNotice(a: QueueAgainstLists): Html | '' {
  if (a.agree) return '';
  const lists = `${a.lists.unfinished} unfinished (active, retrying or waiting) and ${a.lists.failed} failed`;
  if ('unreadable' in a)
    return html`<p class="flash flash-error" role="status" id="queue-against-lists"><strong>The queue could not be read:</strong> the lists know ${lists} callbacks, and cannot tell whether the queue holds others.</p>`;
  return html`<p class="flash flash-error" role="status" id="queue-against-lists"><strong>The queue and the lists differ:</strong> the queue holds <span data-queue="unfinished">${a.queue.unfinished}</span> unfinished and <span data-queue="failed">${a.queue.failed}</span> failed callbacks; the lists know ${lists}. Rows not written yet (after a database outage the workers write them within seconds of its return), or callbacks no worker has taken yet: <a href="/queues">the queue's dashboard</a> shows each job.</p>`;
}

export interface CallbacksPageModel {
  filter: CallbackFilter;
  /** The fields as typed (shown again, valid or not). */
  values: Partial<Record<(typeof FILTER_FIELDS)[number], string>>;
  page?: CallbackPage;
  matched?: { n: number; more: boolean };
  counts: WaitingCounts;
  codes: { code: string; n: number }[];
  viewer: Operator;
  /** This page's address (the run-now form comes back here). */
  self: string;
  /**
   * Two or more merchants: the refs the viewer may filter by (the merchant field) and each row's ref (the merchant
   * column). @defaultValue none (one merchant: neither field nor column)
   */
  merchants?: { refs: readonly string[]; refOf: (merchantNo: string) => string | undefined };
}

const REVIEW_CHOICES = [
  ['open', 'open (waits for a person)'],
  ['closed', 'closed (resolved or dismissed)'],
] as const;

const sameFilter = (a: CallbackFilter, b: CallbackFilter) => filterParams(a).toString() === filterParams(b).toString();

function filterForm(vm: CallbacksPageModel): Html {
  const v = vm.values;
  const chosen = new Set(listOf(vm.filter.status));
  const codes = new Set(listOf(vm.filter.code));
  const typedCodes = [...codes].filter((c) => !vm.codes.some((k) => k.code === c));
  return html`<form class="filter" method="get" action="/callbacks" aria-label="Filter callbacks">
<fieldset><legend>Status (any of)</legend>${ARRIVAL_STATUSES.map(
    (s) =>
      html`<label class="check"><input type="checkbox" name="status" value="${s}"${
        chosen.has(s)
          ? html` \
checked`
          : ''
      }> ${s} <span class="muted">${STATUS_HELP[s]}</span></label>`,
  )}</fieldset>
<fieldset><legend>Last code (any of)</legend>${
    vm.codes.length === 0
      ? html`<p class="muted">No code among ${chosen.size > 0 ? 'these statuses' : 'the callbacks'}.</p>`
      : vm.codes.map(
          (k) =>
            html`<label class="check"><input type="checkbox" name="code" value="${k.code}"${
              codes.has(k.code)
                ? html` \
checked`
                : ''
            }> <code>${k.code}</code> <span class="muted">${k.n}</span></label>`,
        )
  }
<label>Other codes, comma-separated <input name="code" value="${typedCodes.join(', ')}" size="30" autocomplete="off" \
placeholder="any code; case does not matter"></label></fieldset>
<div class="fields">
<label>Kind <select name="kind"><option value="">any</option>${(['payin', 'payout'] as const).map(
    (k) => html`<option value="${k}"${vm.filter.kind === k ? html` selected` : ''}>${k}</option>`,
  )}</select></label>
<label>Review <select name="review"><option value="">any</option>${REVIEW_CHOICES.map(
    ([k, label]) => html`<option value="${k}"${vm.filter.review === k ? html` selected` : ''}>${label}</option>`,
  )}</select></label>
${merchantField(vm.merchants?.refs, vm.filter.merchant)}<label>Merchant order no. <input name="merchantOrderNo" value="${v.merchantOrderNo ?? ''}" size="18" \
placeholder="exact"></label>
<label>Platform order no. <input name="orderNo" value="${v.orderNo ?? ''}" size="18" placeholder="exact"></label>
<label>Amount from <input name="amountMin" value="${v.amountMin ?? ''}" inputmode="decimal" size="9" \
placeholder="decimal"></label>
<label>Amount to <input name="amountMax" value="${v.amountMax ?? ''}" inputmode="decimal" size="9" \
placeholder="decimal"></label>
<label>Received from (UTC) <input name="from" value="${v.from ?? ''}" size="19" placeholder="YYYY-MM-DD HH:MM"></label>
<label>Received before (UTC) <input name="to" value="${v.to ?? ''}" size="19" placeholder="YYYY-MM-DD HH:MM"></label>
</div>
<p><button type="submit" class="primary">Show callbacks</button> <a href="/callbacks">Clear</a></p>
</form>`;
}

/** What can be done with the matching callbacks, for those who may: replay failed ones, run waiting ones now. */
function actions(vm: CallbacksPageModel): Html {
  const statuses = listOf(vm.filter.status);
  if (statuses.length === 0 || !vm.matched || vm.matched.n === 0) return html``;
  const failedOnly = statuses.every((s) => s === 'failed');
  const runnable = statuses.every((s) => RUNNABLE.includes(s));
  // Two merchants or more: a replay and a run now act on one merchant's queue, so each is offered per merchant.
  const perMerchant = vm.merchants && vm.filter.merchant === undefined ? vm.merchants.refs : undefined;
  if (failedOnly && perMerchant && can(vm.viewer.role, 'replays.plan')) {
    return html`<section class="card" aria-labelledby="replay-h"><h2 id="replay-h">Replay these</h2>
<p>A replay acts on one merchant's jobs: dry run each merchant's (nothing changes), and start from there.</p>
${perMerchant.map(
  (ref) =>
    html`<p><a class="button" href="/replays/new?${filterParams(
      { ...vm.filter, merchant: ref },
      { dryRun: '1' },
    ).toString()}">Dry run a replay of ${ref}'s failed jobs</a></p>`,
)}</section>`;
  }
  if (runnable && !failedOnly && perMerchant && can(vm.viewer.role, 'queue.promote')) {
    return html`<p class="muted">Run now acts on one merchant's jobs: choose the merchant above, then run them now.</p>`;
  }
  if (failedOnly) {
    const href = `/replays/new?${filterParams(vm.filter, { dryRun: '1' }).toString()}`;
    return can(vm.viewer.role, 'replays.plan')
      ? html`<section class="card" aria-labelledby="replay-h"><h2 id="replay-h">Replay these</h2>
<p>A dry run says what replaying them would do to the money (nothing changes); from there you start the replay.</p>
<p><a class="button primary" href="${href}">Dry run a replay of these ${vm.matched.n}${vm.matched.more ? '+' : ''} \
failed job(s)</a></p></section>`
      : html`<p class="muted">Replaying needs the role operator (you are ${vm.viewer.role}).</p>`;
  }
  if (runnable) {
    return can(vm.viewer.role, 'queue.promote')
      ? html`<form class="card" method="post" action="/callbacks/run-now" aria-labelledby="run-h"><h2 id="run-h">Run \
now</h2>
<p>These wait out a backoff (up to 10 minutes). Once the platform (or the database) is back, run them now instead of \
waiting: each runs its next attempt at once, checked as always (never credited twice). At most ${RUN_NOW_LIMIT} per \
click.</p>
${[...filterParams(vm.filter)].map(([k, v]) => html`<input type="hidden" name="${k}" value="${v}">`)}
<input type="hidden" name="back" value="${vm.self}">
<label>Reason (required, kept in the audit trail) <input name="reason" required maxlength="2000" size="50" \
autocomplete="off" placeholder="why now, e.g. the platform says Get order is back"></label>
<p><button type="submit" class="primary">Run ${vm.matched.n}${vm.matched.more ? '+' : ''} job(s) now</button></p>\
</form>`
      : html`<p class="muted">Running jobs now needs the role operator (you are ${vm.viewer.role}).</p>`;
  }
  return html``;
}

function table(vm: CallbacksPageModel, page: CallbackPage): Html {
  if (page.callbacks.length === 0) return html`<p>No callback matches this filter.</p>`;
  return html`<table class="stack"><caption class="muted">Newest first. Times in UTC.</caption>
<thead><tr><th scope="col">Received</th>${
    vm.merchants ? html`<th scope="col">Merchant</th>` : ''
  }<th scope="col">Status</th><th scope="col">Kind · state</th><th \
scope="col">Merchant order</th><th scope="col">Platform order</th><th scope="col" class="num">Amount</th><th \
scope="col" class="num">Attempts</th><th scope="col">Code / outcome</th><th scope="col">Last attempt</th></tr></thead>
<tbody>${page.callbacks.map(
    (c) => html`<tr data-job="${c.jobId}"><td data-label="Received" class="mono">${when(c.receivedAt)}</td>${
      vm.merchants ? html`<td data-label="Merchant">${vm.merchants.refOf(c.merchantNo) ?? c.merchantNo}</td>` : ''
    }<td \
data-label="Status">${status(c.status)}</td><td data-label="Kind · state">${c.kind} · ${c.state}</td>
<td data-label="Merchant order"><a href="${orderHref(c.merchantOrderNo)}${
      vm.merchants ? `?merchant=${encodeURIComponent(vm.merchants.refOf(c.merchantNo) ?? '')}` : ''
    }">${c.merchantOrderNo}</a></td><td \
data-label="Platform order" class="mono">${c.orderNo}</td><td data-label="Amount" class="num \
mono">${amountText(c.amount)}</td><td data-label="Attempts" class="num">${c.attempts}</td>
<td data-label="Code / outcome">${c.code ? html`<code>${c.code}</code>` : (c.outcome ?? '')}</td><td data-label="Last \
attempt">${c.detail ?? ''} <span class="muted">${when(c.updatedAt)}</span></td></tr>`,
  )}</tbody></table>
${
  page.nextCursor
    ? html`<p class="pager"><a \
href="/callbacks?${filterParams(vm.filter, { cursor: page.nextCursor }).toString()}">Older callbacks →</a></p>`
    : ''
}`;
}

/** The whole page. Without a filter: the presets and the form, no list (listing everything helps nobody). */
export function callbacksPage(vm: CallbacksPageModel): Html {
  return html`<h1>Callbacks</h1>
${countsLine(vm.counts)}
<nav class="presets" aria-label="Presets"><ul>${PRESETS.map(
    (p) =>
      html`<li><a href="/callbacks?${filterParams(p.filter).toString()}"${
        sameFilter(p.filter, vm.filter) ? html` aria-current="page"` : ''
      } title="${p.help}">${p.label}</a></li>`,
  )}</ul></nav>
${filterForm(vm)}
${
  vm.matched
    ? html`<h2 id="list-h">${vm.matched.n}${vm.matched.more ? '+' : ''} callback(s) match</h2>`
    : html`<p class="muted">Choose a preset or a filter to list callbacks.</p>`
}
${actions(vm)}
${vm.page ? table(vm, vm.page) : ''}`;
}
