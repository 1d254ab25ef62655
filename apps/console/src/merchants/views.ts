/**
 * The merchants page (`/merchants`), a merchant's page (`/merchants/:ref`) with its 24-hour picture, and the landing
 * page's lines for merchants that need a person. Unknown figures print as "—".
 */
import type { Operator } from '../operators/operator.ts';
import { when } from '../web/format.ts';
import { html, type Html } from '../web/html.ts';
import { historyCharts, msText } from './chart.ts';
import type { MinuteFigures } from './minutes.ts';
import { pauseControl } from './pause-control.ts';
import type { MerchantFigures } from './queries.ts';

export const merchantHref = (ref: string) => `/merchants/${encodeURIComponent(ref)}`;

const dash = '—';
/** Units kept with their number (no-break spaces). */
const NBSP_1_MIN = '1\u00a0min';
const NBSP_1_H = '1\u00a0h';
const num = (v: number | null) => (v === null ? dash : v.toLocaleString('en-US'));
const ms = (v: number | null) => (v === null ? dash : msText(v));
const pct = (v: number | null) => (v === null ? dash : `${(v * 100).toFixed(v > 0 && v < 0.01 ? 2 : 1)}\u00a0%`);
const rate = (v: number | null) => (v === null ? dash : `${v.toFixed(v < 10 ? 1 : 0)}/s`);

function stateOf(f: MerchantFigures): Html {
  if (f.paused) return html`<span class="status status-failed">paused</span>`;
  if (f.breaker === 'open') return html`<span class="status status-failed">breaker open</span>`;
  if (f.breaker === 'half-open') return html`<span class="status status-pending">probing</span>`;
  return html`<span class="status status-credited">running</span>`;
}

function budgetText(f: MerchantFigures): string {
  const budget = f.getOrderRps > 0 ? `${f.getOrderRps}/s` : 'no cap';
  if (f.getOrderRate === null) return `${dash} of ${budget}`;
  return `${rate(f.getOrderRate)} of ${budget}${f.budgetUse === null ? '' : `\u00a0(${Math.round(f.budgetUse * 100)}\u00a0%)`}`;
}

/** `/merchants`: one row per merchant (cards below 40rem: table.stack). */
export function merchantsPage(list: readonly MerchantFigures[]): Html {
  if (list.length === 0) return html`<h1>Merchants</h1><p>No merchant to show.</p>`;
  const rows = list.map(
    (f) => html`<tr${f.attention.length ? html` class="needs-person"` : ''}>
<td data-label="Merchant"><a href="${merchantHref(f.ref)}"><strong>${f.ref}</strong></a><br><span class="mono muted">${f.merchantNo}</span></td>
<td data-label="State">${stateOf(f)}${f.paused ? html`<br><span class="muted">by ${f.paused.by}</span>` : ''}</td>
<td data-label="Waiting" class="num">${num(f.waiting)}</td>
<td data-label="Delayed" class="num">${num(f.delayed)}</td>
<td data-label="Failed" class="num">${num(f.failed)}</td>
<td data-label="In flight" class="num">${num(f.active)}</td>
<td data-label="Credits 1 min / 1 h" class="num">${num(f.creditsLastMinute)} / ${num(f.creditsLastHour)}</td>
<td data-label="Callback→credit p99" class="num">${ms(f.creditP99Ms)}</td>
<td data-label="Get order p99 · errors" class="num">${ms(f.getOrderP99Ms)} · ${pct(f.getOrderErrorRate)}</td>
<td data-label="Get order budget" class="num">${budgetText(f)}</td>
</tr>${
      f.attention.length
        ? html`<tr class="attention-row"><td colspan="10" data-label="Needs a person">${f.attention.join('; ')}</td></tr>`
        : ''
    }`,
  );
  return html`<h1>Merchants</h1>
<p class="muted">Queue counts are now; credits and callback-to-credit p99 are from the ledger's arrivals (p99 over the \
last hour); Get order figures are the live workers' last seconds. "—": not known (no worker reporting, or Redis away).</p>
<table class="stack merchants">
<thead><tr><th scope="col">Merchant</th><th scope="col">State</th><th scope="col" class="num">Waiting</th>\
<th scope="col" class="num">Delayed</th><th scope="col" class="num">Failed</th><th scope="col" class="num">In flight</th>\
<th scope="col" class="num">Credits ${NBSP_1_MIN} / ${NBSP_1_H}</th><th scope="col" class="num">Callback→credit p99</th>\
<th scope="col" class="num">Get order p99 · errors</th><th scope="col" class="num">Get order budget</th></tr></thead>
<tbody>${rows}</tbody></table>`;
}

/** `/merchants/:ref`: its figures, why it needs a person, the pause control's spot, and the 24-hour picture. */
export function merchantPage(f: MerchantFigures, minutes: readonly MinuteFigures[], viewer: Operator): Html {
  return html`<p><a href="/merchants">← Merchants</a></p>
<h1>Merchant ${f.ref}</h1>
${
  f.paused
    ? html`<p class="flash flash-error" role="status"><strong>Paused</strong> by ${f.paused.by} since \
${when(f.paused.since)}: ${f.paused.reason}. Its callbacks are acknowledged and stored; none of its jobs runs.</p>`
    : ''
}
${attentionList(f.paused ? f.attention.slice(1) : f.attention)}
${pauseControl(f, viewer)}
<dl class="facts">
<dt>Merchant number</dt><dd class="mono">${f.merchantNo}</dd>
<dt>State</dt><dd>${stateOf(f)}</dd>
<dt>Weight</dt><dd>${f.weight}</dd>
<dt>Waiting · delayed · failed · in flight</dt><dd>${num(f.waiting)} · ${num(f.delayed)} · ${num(f.failed)} · \
${num(f.active)}</dd>
<dt>Oldest waiting since</dt><dd>${f.oldestWaitingSince ? when(f.oldestWaitingSince) : dash}</dd>
<dt>Credits, last minute · last hour</dt><dd>${num(f.creditsLastMinute)} · ${num(f.creditsLastHour)}</dd>
<dt>Callback-to-credit p99 (1 h)</dt><dd>${ms(f.creditP99Ms)}</dd>
<dt>Get order p99 · error rate</dt><dd>${ms(f.getOrderP99Ms)} · ${pct(f.getOrderErrorRate)}</dd>
<dt>Breaker</dt><dd>${f.breaker ?? dash}</dd>
<dt>Get order budget and use</dt><dd>${budgetText(f)}</dd>
<dt>Workers reporting</dt><dd>${num(f.workers)}</dd>
</dl>
<h2>Last 24 hours</h2>
${historyCharts(f.ref, minutes)}`;
}

/** The landing page's lines: one per merchant that needs a person, with a link to its page; nothing when all is well. */
export function merchantsAttention(list: readonly MerchantFigures[]): Html | '' {
  const needing = list.filter((f) => f.attention.length > 0);
  if (needing.length === 0) return '';
  return html`<h2>Merchants that need a person</h2><ul class="attention">${needing.map(
    (f) => html`<li><a href="${merchantHref(f.ref)}"><strong>${f.ref}</strong></a>: ${f.attention.join('; ')}</li>`,
  )}</ul>`;
}

/** Why a person should look, as a list (the pause has its own line above it on the merchant's page). */
function attentionList(lines: readonly string[]): Html | '' {
  return lines.length ? html`<ul class="attention">${lines.map((a) => html`<li>${a}</li>`)}</ul>` : '';
}
