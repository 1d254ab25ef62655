import type { Operator } from '../operators/operator.ts';
import { html, type Html } from './html.ts';
import { layout } from './layout.ts';

/** The error boundary's answer to a page: the same status, code and message the API would give, and a way on. */
export function errorPage(status: number, code: string, message: string, requestId: string, operator?: Operator): Html {
  return layout(
    { title: `${status} ${code}`, operator },
    html`<h1>${status}: ${code}</h1><p>${message}</p><p class="muted">Request <code>${requestId}</code> (quote it when asking for help).</p>
<p><a href="/search">Search</a> · <a href="/reviews">Reviews</a></p>`,
  );
}
