import type { Operator } from '../operators/operator.ts';
import { can } from '../operators/roles.ts';
import { status, when } from '../web/format.ts';
import { html, type Html } from '../web/html.ts';
import { merchantField } from '../web/merchant-field.ts';
import type { AuditFilter, AuditPage } from './queries.ts';

/** The service-clients filter's choices: a machine's writes are kept out of the people's trail unless asked for. */
const SERVICES = [
  ['hide', 'hidden'],
  ['show', 'shown'],
  ['only', 'only them'],
] as const;

const outcomeWord = (outcome: string) => (outcome.startsWith('failed:') ? 'failed' : outcome);

/** The audit log: who did what, to what, why, and how it ended; a filter form and the next page. */
const SERVICES_HIDDEN =
  ' Orders registered by service clients (the shop) are hidden: choose \u201cshown\u201d below to see them.';

export function auditLogPage(
  page: AuditPage,
  filter: AuditFilter,
  viewer: Operator,
  merchantRefs?: readonly string[],
): Html {
  const next = new URLSearchParams();
  for (const [k, v] of Object.entries(filter))
    if (v !== undefined && k !== 'before' && k !== 'limit') next.set(k, String(v));
  if (page.nextBefore !== null) next.set('before', String(page.nextBefore));
  // The merchant column once the console serves two merchants or more (the rows then carry it).
  const named = page.entries.some((e) => e.merchant !== undefined);
  return html`<h1>Audit</h1>
<p class="muted">${
    page.scope === 'all'
      ? 'Every operator\u2019s actions'
      : html`Your actions (<strong>${viewer.name}</strong>); an admin sees everyone\u2019s`
  }, newest first. Times in UTC. Refused attempts are listed as \
<em>denied</em>.${filter.services === 'hide' && !filter.operator ? SERVICES_HIDDEN : ''}</p>
<form class="inline" method="get" action="/audit" role="search">
${
  can(viewer.role, 'audit.readOthers')
    ? html`<label>Operator <input name="operator" value="${filter.operator ?? ''}" size="22"></label>`
    : ''
}
${merchantField(merchantRefs, filter.merchant)}<label>Action <input name="action" value="${filter.action ?? ''}" size="16" placeholder="an action name"></label>
<label>Target <input name="target" value="${filter.target ?? ''}" size="22" placeholder="e.g. an order: order:…">\
</label>
<label>From (UTC) <input name="from" value="${filter.from ?? ''}" size="22" placeholder="2026-11-24 08:00 (UTC)"></label>
<label>To (UTC) <input name="to" value="${filter.to ?? ''}" size="22"></label>
<label>Service clients <select name="services">${SERVICES.map(
    ([v, label]) => html`<option value="${v}"${filter.services === v ? ' selected' : ''}>${label}</option>`,
  )}</select></label>
<button type="submit">Filter</button>
</form>
${
  page.entries.length === 0
    ? html`<p>No action \
recorded${filter.action || filter.target || filter.operator || filter.services === 'only' ? ' for this filter' : ''}.</p>`
    : html`<table class="stack"><thead><tr><th scope="col">When</th>${
        named ? html`<th scope="col">Merchant</th>` : ''
      }<th scope="col">Operator</th><th \
scope="col">Action</th><th scope="col">Target</th><th scope="col">Reason</th><th scope="col">Outcome</th><th \
scope="col">Request</th></tr></thead>
<tbody>${page.entries.map(
        (e) => html`<tr><td data-label="When" class="mono">${when(e.at)}</td>${
          named ? html`<td data-label="Merchant">${e.merchant ?? '—'}</td>` : ''
        }<td data-label="Operator">${e.operator} \
<span class="role role-${e.role}">${e.role}</span></td><td data-label="Action"><code>${e.action}</code></td>
<td data-label="Target" class="mono">${e.target}</td><td data-label="Reason">${
          e.reason ||
          html`<span \
class="muted">(none)</span>`
        }</td><td data-label="Outcome">${status(outcomeWord(e.outcome))}${
          e.outcome.startsWith('failed:') ? html` <code>${e.outcome.slice(7)}</code>` : ''
        }</td><td data-label="Request" class="mono muted">${e.requestId ?? ''}</td></tr>`,
      )}</tbody></table>`
}
${page.nextBefore !== null ? html`<p class="pager"><a href="/audit?${next.toString()}">Older →</a></p>` : ''}`;
}
