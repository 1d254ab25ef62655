import type { FastifyPluginAsync } from 'fastify';
import { REPLAY_PROGRESS_JS } from './replay-progress-script.ts';

/** The console's one stylesheet: readable at 3 a.m. (large type, strong contrast, visible focus), no framework. */
export const CONSOLE_CSS = `
:root{--fg:#1b1f24;--muted:#57606a;--line:#d0d7de;--bg:#fff;--accent:#0b5cad;--ok:#116329;--bad:#a40e26;--warn:#7d4e00}
*{box-sizing:border-box}body{margin:0;font:16px/1.45 system-ui,sans-serif;color:var(--fg);background:var(--bg)}
.skip{position:absolute;left:-999px}.skip:focus{left:1rem;top:1rem;background:#fff;padding:.5rem;z-index:9}
header{display:flex;justify-content:space-between;align-items:center;gap:1rem;padding:.5rem 1.25rem;
  border-bottom:1px solid var(--line);background:#f6f8fa;flex-wrap:wrap}
nav{display:flex;align-items:center;gap:1.25rem}
nav ul{display:flex;gap:1rem;list-style:none;margin:0;padding:0;flex-wrap:wrap}
nav a{color:var(--accent);text-decoration:none;padding:.25rem .1rem}
nav a[aria-current=page]{font-weight:700;border-bottom:3px solid var(--accent)}
.brand{font-size:1.05rem}.who{display:flex;align-items:center;gap:.5rem;margin:0}
main{padding:1rem 1.25rem;max-width:78rem}
h1{font-size:1.5rem;margin:.5rem 0 1rem}
h2{font-size:1.15rem;margin:1.5rem 0 .5rem}
a:focus,button:focus,input:focus,select:focus,textarea:focus,summary:focus{outline:3px solid #f0b400;outline-offset:1px}
table{border-collapse:collapse;width:100%;margin:.5rem 0 1rem}
th,td{text-align:left;padding:.4rem .5rem;border-bottom:1px solid var(--line);vertical-align:top}
th{font-size:.85rem;color:var(--muted);font-weight:600}td.num{text-align:right;font-variant-numeric:tabular-nums}
code,.mono{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.92em}
.role{display:inline-block;padding:0 .4rem;border-radius:.6rem;font-size:.8rem;border:1px solid var(--line)}
.role-admin{background:#fff1e5}
.role-operator{background:#ddf4ff}
.role-viewer{background:#f6f8fa}
.role-service{background:#eaeef2;font-style:italic}
.flash{padding:.6rem .8rem;border-radius:.3rem;margin:0 0 1rem}
.flash-ok{background:#dafbe1;color:var(--ok)}
.flash-error{background:#ffebe9;color:var(--bad)}
.status{font-weight:600}.status-credited,.status-succeeded,.status-applied,.status-resolved{color:var(--ok)}
.status-pending,.status-open,.status-waiting,.status-delayed,.status-active{color:var(--warn)}
.status-failed,.status-refused,.status-denied,.status-review{color:var(--bad)}.status-dismissed{color:var(--muted)}
form.inline{display:flex;gap:.5rem;align-items:flex-end;flex-wrap:wrap;margin:.25rem 0}
label{display:flex;flex-direction:column;font-size:.85rem;color:var(--muted);gap:.15rem}
input,select,textarea{font:inherit;padding:.35rem .45rem;border:1px solid #8c959f;border-radius:.25rem;color:var(--fg)}
button{font:inherit;padding:.35rem .8rem;border:1px solid #8c959f;border-radius:.25rem;background:#f6f8fa;
  cursor:pointer}
button.primary{background:var(--accent);color:#fff;border-color:var(--accent)}button.danger{color:var(--bad)}
.status-neutral{font-weight:400}
.muted{color:var(--muted)}
.card{border:1px solid var(--line);border-radius:.4rem;padding:.75rem 1rem;margin:.75rem 0}
.story{border-left:3px solid var(--warn);background:#fff8c5;padding:.4rem .75rem;margin:.5rem 0}
.story.story-forgery{border-left-color:var(--bad);background:#ffebe9}.story p{margin:.3rem 0}
.story code.command{display:inline-block;padding:.15rem .4rem;background:#fff;border:1px solid var(--line);
  overflow-wrap:anywhere}
main.bare{max-width:26rem;margin:3rem auto}
form.login{display:flex;flex-direction:column;gap:.6rem}
form.login input{padding:.5rem}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:.25rem 1rem;margin:.5rem 0}
dl.facts dt{color:var(--muted)}
dl.facts dd{margin:0}
.pager{display:flex;gap:1rem;margin:1rem 0}
.counts{font-size:1.1rem}.counts a{text-decoration:none}.counts strong{font-size:1.25rem}
.presets ul{display:flex;gap:.5rem;list-style:none;margin:.5rem 0;padding:0;flex-wrap:wrap}
.presets a{display:inline-block;padding:.3rem .8rem;border:1px solid var(--line);border-radius:1rem;color:var(--accent);
  text-decoration:none}
.presets a[aria-current=page]{background:var(--accent);color:#fff;border-color:var(--accent)}
fieldset{border:1px solid var(--line);border-radius:.3rem;margin:.5rem 0;padding:.4rem .75rem;display:flex;
  flex-wrap:wrap;gap:.25rem 1rem;min-width:0}
legend{font-size:.85rem;color:var(--muted)}
label.check{flex-direction:row;align-items:center;gap:.3rem;color:var(--fg);font-size:.95rem}
.fields{display:flex;flex-wrap:wrap;gap:.5rem;align-items:flex-end}
a.button{display:inline-block;padding:.35rem .8rem;border:1px solid var(--accent);border-radius:.25rem;
  text-decoration:none}
a.button.primary{background:var(--accent);color:#fff}
.outcomes{display:flex;flex-wrap:wrap;gap:.5rem 1.5rem;margin:.5rem 0;padding:0;list-style:none}
main{overflow-wrap:break-word}
.charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(18rem,1fr));gap:0 2.5rem}
.chart{margin:.5rem 0 1.5rem;min-width:0;max-width:40rem}.chart-svg{width:100%;height:auto;display:block}
.chart-svg .grid{stroke:#eaeef2;stroke-width:1}.chart-svg .axis{stroke:#8c959f;stroke-width:1}
.chart-svg .tick{font:14px system-ui,sans-serif;fill:#57606a}
.chart-svg polygon.area{stroke:none;fill-opacity:.18}
.chart-svg polyline{fill:none;stroke-width:1.5;stroke-linejoin:round}.chart-svg circle{stroke:none}
.series-received{stroke:#0b5cad;fill:#0b5cad;color:#0b5cad}.series-credited{stroke:#116329;fill:#116329;color:#116329}
.series-failed{stroke:#a40e26;fill:#a40e26;color:#a40e26}.series-p99{stroke:#7d4e00;fill:#7d4e00;color:#7d4e00}
figcaption{font-size:.85rem;color:var(--muted);margin-top:.25rem}
.legend .key{font-weight:600;margin-right:.6rem;white-space:nowrap}
.legend .key::before{content:"";display:inline-block;width:1rem;height:.2rem;margin-right:.3rem;vertical-align:middle;
  background:currentColor}
ul.attention{border-left:3px solid var(--bad);background:#ffebe9;color:var(--bad);margin:.5rem 0 1rem;
  padding:.4rem .75rem .4rem 1.75rem}
ul.attention a{color:var(--bad)}
tr.needs-person td{border-bottom:0}table.merchants td:first-child a{white-space:nowrap}tr.attention-row td{color:var(--bad);font-size:.9rem}
@media (max-width:40rem){
header{padding:.5rem .75rem}main{padding:.75rem}nav{flex-wrap:wrap;gap:.5rem}
input,select,textarea{max-width:100%}textarea{width:100%}input[size]{width:100%}
dl.facts{grid-template-columns:1fr}dl.facts dd{margin:0 0 .4rem}
table.stack,table.stack tbody,table.stack tr,table.stack td,table.stack caption{display:block;width:100%}
table.stack thead{position:absolute;left:-9999px}
table.stack tr{border-bottom:2px solid var(--line);padding:.4rem 0}
table.stack td{border:0;padding:.15rem 0;text-align:left}
table.stack td[data-label]::before{content:attr(data-label) ": ";color:var(--muted);font-size:.85rem}
table.stack td.num{text-align:left}
td,dd,code{overflow-wrap:anywhere}
}
`;

/** The console's icon: a small square, so browsers stop asking for /favicon.ico and logging 404s. */
const FAVICON_SVG =
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="3" fill="#0b5cad"/>' +
  '<path d="M4 8.5l2.5 2.5L12 5" stroke="#fff" stroke-width="2" fill="none"/></svg>';

/**
 * `/assets/console.css`, `/assets/replay-progress.js` and `/assets/favicon.svg`, served without authentication (the
 * login page uses them); `/favicon.ico` answers 204. Nothing else is served from here.
 */
export const assetsPlugin: FastifyPluginAsync = async (app) => {
  app.get('/assets/console.css', { schema: { hide: true } }, async (_req, reply) =>
    reply.type('text/css; charset=utf-8').header('cache-control', 'public, max-age=300').send(CONSOLE_CSS),
  );
  app.get('/assets/replay-progress.js', { schema: { hide: true } }, async (_req, reply) =>
    reply
      .type('text/javascript; charset=utf-8')
      .header('cache-control', 'public, max-age=300')
      .header('x-content-type-options', 'nosniff')
      .send(REPLAY_PROGRESS_JS),
  );
  app.get('/assets/favicon.svg', { schema: { hide: true } }, async (_req, reply) =>
    reply.type('image/svg+xml').header('cache-control', 'public, max-age=86400').send(FAVICON_SVG),
  );
  app.get('/favicon.ico', { schema: { hide: true } }, async (_req, reply) =>
    reply.code(204).header('cache-control', 'public, max-age=86400').send(),
  );
};
