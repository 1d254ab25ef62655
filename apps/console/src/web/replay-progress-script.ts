/**
 * The one script the console serves (/assets/replay-progress.js): on a running replay's page it polls
 * GET /api/replays/{id} every `data-poll-ms` and writes the counters into their elements with textContent (never
 * markup: a value cannot become HTML). Nothing else on the page is touched, so what an operator types stays and the
 * focus does not move. It stops when the replay ends and says so. Kept as plain browser JavaScript in a string:
 * this project's TypeScript has no DOM types, and the page must not depend on a build step.
 */
/** What the page calls each outcome of a replayed job (the page's own words: replays/views.ts). */
const OUTCOME_WORDS = {
  credited: 'credited',
  finalised: 'payout finalised',
  duplicate: 'duplicate (applied before: nothing done)',
  review: 'into review',
  failedAgain: 'failed again',
  retrying: 'queued or retrying',
};

export const REPLAY_PROGRESS_JS = `'use strict';
(function () {
  var root = document.querySelector('[data-replay-id]');
  if (!root) return;
  var id = root.getAttribute('data-replay-id');
  var every = Number(root.getAttribute('data-poll-ms')) || 2000;
  var polls = 0;
  var words = ${JSON.stringify(OUTCOME_WORDS)};
  function set(sel, text) {
    var el = root.querySelector(sel);
    if (el && el.textContent !== text) el.textContent = text;
  }
  function group(s) {
    var p = s.split('.');
    p[0] = p[0].replace(/\\B(?=(\\d{3})+(?!\\d))/g, ',');
    return p[0] + '.' + ((p[1] || '') + '00').slice(0, Math.max(2, (p[1] || '').length));
  }
  function when(iso) { return iso ? iso.slice(0, 19).replace('T', ' ') + ' UTC' : '\\u2014'; }
  function outcomes(list) {
    var dd = root.querySelector('[data-outcomes]');
    if (!dd) return;
    var frag = document.createDocumentFragment();
    if (list.length === 0) {
      var none = document.createElement('span');
      none.className = 'muted';
      none.textContent = 'none sent back yet';
      frag.appendChild(none);
    }
    list.forEach(function (o, i) {
      if (i > 0) frag.appendChild(document.createTextNode(' \\u00b7 '));
      var span = document.createElement('span');
      span.setAttribute('data-outcome', o.outcome);
      var n = document.createElement('strong');
      n.textContent = String(o.jobs);
      span.appendChild(n);
      var money = o.currency && o.amount !== '0' ? ', ' + group(o.amount) + ' ' + o.currency : '';
      span.appendChild(document.createTextNode(' ' + (words[o.outcome] || o.outcome) + money));
      frag.appendChild(span);
    });
    dd.replaceChildren(frag);
  }
  function tick() {
    var ask = { headers: { accept: 'application/json' }, credentials: 'same-origin', cache: 'no-store' };
    fetch('/api/replays/' + encodeURIComponent(id), ask)
      .then(function (res) { return res.ok ? res.json() : null; })
      .then(function (body) {
        polls++;
        root.setAttribute('data-polls', String(polls));
        if (!body || !body.replay) return setTimeout(tick, every);
        var r = body.replay;
        var done = r.replayed + r.skipped;
        var status = root.querySelector('[data-status]');
        if (status && status.getAttribute('data-status') !== r.status) {
          status.setAttribute('data-status', r.status);
          status.className = 'status status-' + r.status;
          status.textContent = r.status;
        }
        var bar = root.querySelector('progress');
        var pct = r.total === 0 ? 100 : Math.round((done / r.total) * 100);
        if (bar) { bar.value = pct; bar.textContent = pct + ' %'; }
        set('[data-progress]', done + ' of ' + r.total);
        set('[data-replayed]', String(r.replayed));
        set('[data-skipped]', String(r.skipped));
        set('[data-remaining]', String(r.remaining));
        set('[data-ended]', when(r.finishedAt));
        outcomes(r.outcomes || []);
        if (r.status === 'running') return setTimeout(tick, every);
        var note = root.querySelector('[data-ended-note]');
        if (note) note.hidden = false;
        var live = root.querySelector('[data-live]');
        if (live) live.hidden = true;
        // Outcomes keep changing for a while after the last job is sent back: a slower poll, until they settle.
        var settling = r.outcomes && r.outcomes.some(function (o) { return o.outcome === 'retrying'; });
        if (settling) setTimeout(tick, every * 2);
      })
      .catch(function () { setTimeout(tick, every * 2); });
  }
  setTimeout(tick, every);
})();
`;
