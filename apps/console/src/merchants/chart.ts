/**
 * The 24-hour picture of a merchant as server-rendered inline SVG: no script and nothing fetched, so the pages' CSP
 * (`default-src 'none'`, `style-src 'self'`) holds; colours come from console.css classes and presentation attributes,
 * never a `style` attribute. Each chart is a labelled image (`role="img"`, `<title>`, `<desc>` with the figures in
 * words) drawn in a 400-unit-wide view box with 14-unit text, so that it stays readable (about 12 px) when a 375 px
 * screen shrinks it; on a wide screen the two charts stand side by side.
 */
import { html, raw, type Html } from '../web/html.ts';
import type { MinuteFigures } from './minutes.ts';

const W = 400;
const H = 190;
const PAD = { left: 50, right: 12, top: 12, bottom: 30 };
const PLOT_W = W - PAD.left - PAD.right;
const PLOT_H = H - PAD.top - PAD.bottom;

/** A series: its figure per minute (null: no value, a gap in the line). */
interface Series {
  name: string;
  cls: string;
  values: readonly (number | null)[];
  /** Drawn as a filled area under its line (received: the credited line on top shows what was not credited). */
  area?: boolean;
}

/** Both charts of the merchant's page: callbacks per minute, and callback-to-credit p99. */
export function historyCharts(ref: string, minutes: readonly MinuteFigures[]): Html {
  if (minutes.length === 0) return html`<p class="muted">No history yet.</p>`;
  const total = (k: 'received' | 'credited' | 'failed') => minutes.reduce((n, m) => n + m[k], 0);
  const busiest = minutes.reduce((b, m) => (m.received > b.received ? m : b), minutes[0]!);
  const p99s = minutes.map((m) => m.creditP99Ms).filter((v): v is number => v !== null);
  const worst = p99s.length ? Math.max(...p99s) : null;
  const span = `${hhmm(minutes[0]!.minute)} to ${hhmm(minutes.at(-1)!.minute)} UTC`;
  const counts = chart({
    id: 'chart-callbacks',
    title: `${ref}: callbacks per minute, last 24 hours`,
    desc:
      `From ${span}: ${total('received')} received, ${total('credited')} credited, ${total('failed')} failed for ` +
      `good; the busiest minute received ${busiest.received}` +
      (busiest.received > 0 ? ` at ${hhmm(busiest.minute)} UTC.` : '.'),
    minutes,
    series: [
      { name: 'received', cls: 'series-received', values: minutes.map((m) => m.received), area: true },
      { name: 'credited', cls: 'series-credited', values: minutes.map((m) => m.credited) },
      { name: 'failed', cls: 'series-failed', values: minutes.map((m) => m.failed) },
    ],
    unit: '',
  });
  const latency = chart({
    id: 'chart-p99',
    title: `${ref}: callback-to-credit p99 per minute, last 24 hours`,
    desc:
      worst === null
        ? `From ${span}: nothing was credited, so there is no callback-to-credit time.`
        : `From ${span}: the worst minute's p99 was ${msText(worst)}; minutes without credits are left blank.`,
    minutes,
    series: [{ name: 'p99', cls: 'series-p99', values: minutes.map((m) => m.creditP99Ms) }],
    unit: 'ms',
  });
  return html`<div class="charts"><figure class="chart">${counts}<figcaption>${legend([
    ['series-received', 'received'],
    ['series-credited', 'credited'],
    ['series-failed', 'failed for good'],
  ])}Callbacks per minute (UTC).</figcaption></figure>
<figure class="chart">${latency}<figcaption>${legend([['series-p99', 'p99']])}Callback-to-credit p99 per minute \
(UTC); blank where nothing was credited.</figcaption></figure></div>`;
}

function legend(items: [string, string][]): Html {
  return html`<span class="legend">${items.map(([cls, label]) => html`<span class="key ${cls}">${label}</span> `)}</span>`;
}

interface ChartSpec {
  id: string;
  title: string;
  desc: string;
  minutes: readonly MinuteFigures[];
  series: Series[];
  unit: 'ms' | '';
}

/** One chart: y axis from 0 to a round maximum, hour ticks every 6 hours, one polyline per series. */
function chart(spec: ChartSpec): Html {
  const n = spec.minutes.length;
  const highest = Math.max(0, ...spec.series.flatMap((s) => s.values.filter((v): v is number => v !== null)));
  // At least 2 callbacks or 1 s, so that the middle tick is a whole number (an empty chart reads 0, 1, 2).
  const top = niceMax(Math.max(highest, spec.unit === 'ms' ? 1000 : 2));
  const x = (i: number) => PAD.left + (n <= 1 ? 0 : (i / (n - 1)) * PLOT_W);
  const y = (v: number) => PAD.top + PLOT_H - (v / top) * PLOT_H;
  const yTicks = [0, top / 2, top].map(
    (v) =>
      html`<line class="grid" x1="${PAD.left}" x2="${W - PAD.right}" y1="${y(v)}" y2="${y(v)}"/>` +
      `<text class="tick" x="${PAD.left - 4}" y="${y(v) + 4}" text-anchor="end">${esc(axisText(v, spec.unit))}</text>`,
  );
  const xTicks: string[] = [];
  spec.minutes.forEach((m, i) => {
    const d = new Date(m.minute);
    if (d.getUTCMinutes() === 0 && d.getUTCHours() % 6 === 0)
      xTicks.push(
        `<line class="grid" x1="${x(i)}" x2="${x(i)}" y1="${PAD.top}" y2="${PAD.top + PLOT_H}"/>` +
          `<text class="tick" x="${x(i)}" y="${H - 10}" text-anchor="middle">${hhmm(m.minute)}</text>`,
      );
  });
  const baseline = (PAD.top + PLOT_H).toFixed(1);
  // Areas first, so that every line is drawn over them.
  const areas = spec.series.map((s) =>
    s.area
      ? segments(s.values, x, y)
          .map((pts) => area(s, pts, baseline))
          .join('')
      : '',
  );
  const lines = [
    ...areas,
    ...spec.series.map((s) =>
      segments(s.values, x, y)
        .map((pts) => polyline(s, pts))
        .join(''),
    ),
  ];
  return html`<svg id="${spec.id}" class="chart-svg" viewBox="0 0 ${W} ${H}" role="img" aria-labelledby="${spec.id}-t \
${spec.id}-d" xmlns="http://www.w3.org/2000/svg"><title id="${spec.id}-t">${spec.title}</title><desc id="${spec.id}-d">\
${spec.desc}</desc>${raw(yTicks.join(''))}${raw(xTicks.join(''))}<line class="axis" x1="${PAD.left}" x2="${W - PAD.right}" \
y1="${PAD.top + PLOT_H}" y2="${PAD.top + PLOT_H}"/>${raw(lines.join(''))}</svg>`;
}

/** The runs of consecutive non-null values, as points. */
function segments(values: readonly (number | null)[], x: (i: number) => number, y: (v: number) => number): string[][] {
  const out: string[][] = [];
  let run: string[] = [];
  values.forEach((v, i) => {
    if (v === null) {
      if (run.length) out.push(run);
      run = [];
    } else run.push(`${x(i).toFixed(1)},${y(v).toFixed(1)}`);
  });
  if (run.length) out.push(run);
  return out;
}

/** The area between a run of points and the x axis. */
function area(s: Series, pts: string[], baseline: string): string {
  const first = pts[0]!.split(',')[0]!;
  const last = pts.at(-1)!.split(',')[0]!;
  return `<polygon class="area ${s.cls}" points="${first},${baseline} ${pts.join(' ')} ${last},${baseline}"/>`;
}

function polyline(s: Series, pts: string[]): string {
  // One point alone draws nothing as a line: a dot instead.
  if (pts.length === 1) {
    const [cx, cy] = pts[0]!.split(',');
    return `<circle class="${s.cls}" cx="${cx}" cy="${cy}" r="1.8" data-series="${s.name}"/>`;
  }
  return `<polyline class="${s.cls}" fill="none" points="${pts.join(' ')}" data-series="${s.name}"/>`;
}

/** The smallest of 1, 2, 5 × 10^k at or above `v` (at least 1). */
export function niceMax(v: number): number {
  if (v <= 1) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

function axisText(v: number, unit: 'ms' | ''): string {
  if (unit === 'ms') return msText(v);
  return v >= 10_000 ? `${Math.round(v / 1000)}k` : String(Math.round(v * 10) / 10);
}

export function msText(ms: number): string {
  if (ms >= 60_000) return `${Math.round(ms / 6000) / 10} min`;
  if (ms >= 1000) return `${Math.round(ms / 100) / 10} s`;
  return `${Math.round(ms)} ms`;
}

const hhmm = (iso: string) => iso.slice(11, 16);
const esc = (s: string) => s.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]!);
