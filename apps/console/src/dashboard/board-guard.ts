/**
 * The script the console adds to bull-board's page (served as /assets/board-guard.js). bull-board offers actions the
 * console refuses (clean, delete, edit, duplicate, pause, ...), and its UI shows nothing when the server refuses
 * one. This script (1) hides the controls of refused actions, by their labels, as bull-board renders them; (2) asks
 * for a reason before each action and sends it as `X-Reason` (URI-encoded: headers are Latin-1); (3) shows the
 * server's message when an action is refused. The server enforces all of it anyway: hiding is only so the page
 * offers what the server allows.
 */
export const BOARD_GUARD_JS = String.raw`(() => {
  'use strict';
  const role = (document.currentScript && document.currentScript.dataset.role) || 'viewer';
  const refused = [
    /^clean( all)?\b/i, /^update data$/i, /^duplicate$/i, /^reschedule$/i, /^change priority$/i,
    /^remove unprocessed children$/i, /^(pause|resume)( all)?\b/i, /^empty$/i, /^obliterate$/i, /^add job$/i,
    /^set (concurrency|rate limit)$/i, /^delete\b/i, /^remove\b/i, /^group actions$/i, /^edit\b/i,
    /^retry all$/i,
  ];
  if (role === 'viewer') refused.push(/^retry/i, /^promote/i);
  // A job card's actions are icons without text: known by their icon (lucide), and named here for screen readers.
  const icons = {
    'lucide-refresh-cw': 'Retry',
    'lucide-files': 'Duplicate',
    'lucide-pencil': 'Edit',
    'lucide-trash': 'Delete',
    'lucide-trash-2': 'Delete',
  };
  const iconName = (el) => {
    const svg = el.querySelector('svg');
    if (!svg) return '';
    for (const c of svg.classList) if (icons[c]) return icons[c];
    return '';
  };
  const nameOf = (el) =>
    (el.getAttribute('aria-label') || el.getAttribute('title') || el.textContent || iconName(el) || '').trim();
  const refusedHere = (name) => refused.some((re) => re.test(name));
  // "Retry all" is the replay wizard's (dry run, rate, a count and each job recorded): a link to it, where the
  // failed jobs are listed, for those who may retry.
  const pointToWizard = () => {
    if (role === 'viewer' || document.getElementById('mcb-replay-wizard')) return;
    if (!/[?&]status=failed\b/.test(location.search) || !document.body) return;
    const p = document.createElement('p');
    p.id = 'mcb-replay-wizard';
    p.setAttribute('role', 'note');
    p.style.cssText = 'margin:0;padding:8px 16px;background:#fff7e6;border-bottom:1px solid #f0c36d;font:14px sans-serif';
    p.append('To retry failed jobs in bulk, use the ');
    const a = document.createElement('a');
    a.href = '/replays/new';
    a.textContent = 'replay wizard';
    p.append(a, ': it dry-runs them first, sends them back at a rate, and records the count and each job.');
    document.body.prepend(p);
  };
  const hide = () => {
    pointToWizard();
    for (const el of document.querySelectorAll('button, [role="menuitem"], [role="option"]')) {
      const icon = iconName(el);
      if (icon && !el.getAttribute('aria-label') && !(el.textContent || '').trim()) el.setAttribute('aria-label', icon);
      const off = refusedHere(nameOf(el));
      if (off === (el.dataset.mcbHidden === '1')) continue;
      el.dataset.mcbHidden = off ? '1' : '0';
      el.hidden = off;
      el.style.display = off ? 'none' : '';
      if (off) {
        el.setAttribute('aria-hidden', 'true');
        el.tabIndex = -1;
      } else {
        el.removeAttribute('aria-hidden');
        el.removeAttribute('tabindex');
      }
    }
  };
  const watched = { childList: true, subtree: true, attributes: true, attributeFilter: ['title', 'aria-label'] };
  new MutationObserver(hide).observe(document.documentElement, watched);
  document.addEventListener('DOMContentLoaded', hide);

  const askReason = (method, url) => {
    const what = String(url).replace(/^.*\/api\/queues\//, '');
    const reason = window.prompt('Why? (' + method + ' ' + what + ') The reason is recorded in the audit trail with your name.');
    return reason && reason.trim() ? reason.trim() : undefined;
  };
  const report = (status, text) => {
    let message = '';
    try { message = JSON.parse(text).message || ''; } catch (e) { message = ''; }
    window.alert('Refused (' + status + '): ' + (message || 'the console refused this action'));
  };
  const changes = (method) => method !== 'GET' && method !== 'HEAD' && method !== 'OPTIONS';

  const open = XMLHttpRequest.prototype.open;
  const send = XMLHttpRequest.prototype.send;
  XMLHttpRequest.prototype.open = function (method, url) {
    this.mcbRequest = { method: String(method).toUpperCase(), url: String(url) };
    return open.apply(this, arguments);
  };
  XMLHttpRequest.prototype.send = function (body) {
    const r = this.mcbRequest;
    if (r && changes(r.method)) {
      const reason = askReason(r.method, r.url);
      if (!reason) { this.abort(); return; }
      this.setRequestHeader('X-Reason', encodeURIComponent(reason));
      this.addEventListener('load', () => { if (this.status >= 400) report(this.status, this.responseText); });
    }
    return send.call(this, body);
  };
  const fetch0 = window.fetch;
  window.fetch = async function (input, init) {
    const method = String((init && init.method) || (input && input.method) || 'GET').toUpperCase();
    if (!changes(method)) return fetch0.apply(this, arguments);
    const reason = askReason(method, typeof input === 'string' ? input : input.url);
    if (!reason) throw new DOMException('no reason given', 'AbortError');
    const headers = new Headers((init && init.headers) || (input && input.headers) || {});
    headers.set('X-Reason', encodeURIComponent(reason));
    const res = await fetch0.call(this, input, Object.assign({}, init, { headers }));
    if (res.status >= 400) report(res.status, await res.clone().text());
    return res;
  };
})();
`;
