import type { Operator } from '../operators/operator.ts';
import { html, type Html } from './html.ts';

/** The areas in the navigation, in order; `/queues` is bull-board (its own app, same login). */
export const NAV = [
  { area: 'search', href: '/search', label: 'Search' },
  { area: 'merchants', href: '/merchants', label: 'Merchants' },
  { area: 'callbacks', href: '/callbacks', label: 'Callbacks' },
  { area: 'reviews', href: '/reviews', label: 'Reviews' },
  { area: 'replays', href: '/replays', label: 'Replays' },
  { area: 'audit', href: '/audit', label: 'Audit' },
  { area: 'queues', href: '/queues', label: 'Queues (bull-board)' },
] as const;

export type Area = (typeof NAV)[number]['area'];

/** What every page tells the layout. */
export interface PageFrame {
  title: string;
  /** Highlighted in the navigation. */
  area?: Area;
  /** The signed-in operator; shown with their role, and the logout button. */
  operator?: Operator;
  /** One line at the top: what the last action did (`ok`) or why it was refused (`error`). */
  flash?: { kind: 'ok' | 'error'; text: string };
}

/**
 * The console's page: a skip link, the navigation, who is signed in, the flash line, then the page. Plain HTML
 * forms and links (one script, only on a running replay's page, updates its counters): every control is reachable
 * with Tab and works with Enter, and nothing is fetched from outside.
 */
export function layout(frame: PageFrame, body: Html): Html {
  const nav = NAV.map(
    (n) => html`<li><a href="${n.href}"${n.area === frame.area ? html` aria-current="page"` : ''}>${n.label}</a></li>`,
  );
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${frame.title} · Merchant console</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="/assets/console.css"><link rel="icon" href="/assets/favicon.svg" type="image/svg+xml"></head>
<body><a class="skip" href="#main">Skip to content</a>
<header><nav aria-label="Console"><strong class="brand">Merchant console</strong><ul>${nav}</ul></nav>
${frame.operator ? whoForm(frame.operator) : ''}
</header>
<main id="main">
${frame.flash ? flashLine(frame.flash) : ''}
${body}
</main></body></html>`;
}

/** Who is signed in, with their role, and the logout button. */
function whoForm(operator: Operator): Html {
  const role = html`<span class="role role-${operator.role}">${operator.role}</span>`;
  const logout = html` <button type="submit">Log out</button>`;
  return html`<form class="who" method="post" action="/logout"><span>${operator.name} ${role}</span>${logout}</form>`;
}

/** The flash line: read out at once when it says why something was refused. */
function flashLine(flash: NonNullable<PageFrame['flash']>): Html {
  const role = flash.kind === 'error' ? 'alert' : 'status';
  return html`<p class="flash flash-${flash.kind}" role="${role}">${flash.text}</p>`;
}
