import type { FleetState } from '@mcb/core/platform';
import type { QueueAgainstLists, WaitingCounts } from '../callbacks/counts.ts';
import { countsLine, queueAgainstListsNotice } from '../callbacks/views.ts';
import { timelineTable } from '../orders/views.ts';
import { formatDecimal } from '@mcb/core/money';
import { orderHref } from '../web/format.ts';
import { html, type Html } from '../web/html.ts';
import type { FoundNumber } from './queries.ts';

/** The search box: one field, for either number; autofocused, so an operator can type at once. */
export function searchPage(
  query: string,
  found?: Exclude<FoundNumber, { kind: 'order' }>,
  waiting?: { counts: WaitingCounts; against: QueueAgainstLists },
  platform?: FleetState,
  merchants?: Html | '',
): Html {
  return html`${platform ? platformNotice(platform) : ''}${merchants}<h1>Find an order</h1>
<form class="inline" method="get" action="/search" role="search">
<label>Merchant order no., platform OrderNo or customer id <input name="q" value="${query}" size="36" autofocus required \
maxlength="128" placeholder="an order no. or a customer id"></label>
<button class="primary" type="submit">Find</button>
</form>
${
  waiting
    ? html`<h2>What waits</h2>${countsLine(waiting.counts)}${queueAgainstListsNotice(waiting.against)}<p class="muted">Each is a list: failed callbacks can be dry-run \
and replayed from theirs, retrying and waiting ones run now.</p>`
    : ''
}
${
  found?.kind === 'customer'
    ? html`<h2>Orders of customer <code>${found.query}</code></h2>
<ul>${found.orders.map(
        (o) =>
          html`<li><a href="${orderHref(o.merchantOrderNo)}">${o.merchantOrderNo}</a> · ${o.kind} · ${o.status} · <span class="mono">${formatDecimal(o.amount)} ${o.currency}</span></li>`,
      )}</ul>`
    : ''
}
${
  found?.kind === 'nothing'
    ? html`<p role="status">No order and no callback found for <code>${found.query}</code>.
Check the number with the customer or the platform; if the platform says it sent a callback, look in <a \
href="/queues">the queue</a> and in <a href="/reviews">open reviews</a>.</p>`
    : ''
}
${
  found?.kind === 'callbacks'
    ? html`<h2>Callbacks for platform order <code>${found.query}</code></h2>
<p>These arrived, but name no order registered here (an order registered late, or under another \
number).</p>${timelineTable(found.timeline)}`
    : ''
}`;
}

/** Said only when Get order is held back: the fleet's breaker is open, or the fleet asks beyond PLATFORM_MAX_RPS. */
function platformNotice(p: FleetState): Html | '' {
  if (p.breakerOpen) {
    return html`<p class="flash flash-error" role="status"><strong>Platform breaker open:</strong> Get order failed \
repeatedly, so callbacks wait
(they are not lost) while the workers probe the platform a few times a second; they resume once it answers.</p>`;
  }
  if (p.throttled) {
    return html`<p class="flash flash-error" role="status"><strong>Platform throttled:</strong> the workers ask Get \
order faster than
PLATFORM_MAX_RPS allows, so callbacks wait their turn (a backlog drains at that rate).</p>`;
  }
  return '';
}
