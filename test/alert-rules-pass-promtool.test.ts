import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { createMetricsRegistry } from '@mcb/core/metrics';

// The alerting rules and the dashboard are code: promtool (Debian's prometheus package; .ci/run installs it) checks
// the rules' syntax, runs their unit tests (deploy/prometheus/alerts.test.yml) and parses every dashboard query;
// every metric they name must be one our processes export, and every runbook link must land on a section.
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const dir = join(ROOT, 'deploy/prometheus');
const promtool = spawnSync('promtool', ['--version'], { encoding: 'utf8' }).status === 0;
const tmp = mkdtempSync(join(tmpdir(), 'mcb-promtool-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

interface Rule {
  alert: string;
  expr: string;
  annotations: Record<string, string>;
}
const rules: Rule[] = (
  parse(readFileSync(join(dir, 'alerts.yml'), 'utf8')) as { groups: { rules: Rule[] }[] }
).groups.flatMap((g) => g.rules);
const dashboard = JSON.parse(readFileSync(join(ROOT, 'deploy/grafana/dashboard.json'), 'utf8')) as {
  panels: { title: string; targets: { expr: string }[] }[];
  templating: { list: { name: string; type: string; multi?: boolean; includeAll?: boolean; definition?: string }[] };
};
const panelQueries = dashboard.panels.flatMap((p) => p.targets.map((t) => ({ panel: p.title, expr: t.expr })));

/** Every metric name our processes register: the names in their metric definitions, plus prom-client's defaults. */
function exportedMetricNames(): Set<string> {
  const names = new Set<string>();
  const walk = (d: string) => {
    for (const entry of readdirSync(d, { withFileTypes: true })) {
      const path = join(d, entry.name);
      if (entry.isDirectory()) {
        if (entry.name !== 'node_modules' && entry.name !== 'test') walk(path);
      } else if (entry.name.endsWith('.ts')) {
        for (const m of readFileSync(path, 'utf8').matchAll(/name: '((?:mcb|ingest|console)_[a-z0-9_]+)'/g))
          names.add(m[1]!);
      }
    }
  };
  for (const base of ['apps', 'packages'])
    for (const pkg of readdirSync(join(ROOT, base))) walk(join(ROOT, base, pkg, 'src'));
  for (const m of createMetricsRegistry('defaults').getMetricsAsArray()) names.add(m.name);
  return names;
}

/** Metric names an expression reads (histogram series suffixes folded onto their metric). */
function metricsIn(expr: string): string[] {
  const found = expr.match(/\b(?:mcb|ingest|console|process|nodejs)_[a-z0-9_]+/g) ?? [];
  return [...new Set(found.map((n) => n.replace(/_(bucket|count|sum)$/, '')))];
}

/**
 * Metrics of a process or of the one Redis, for every merchant: no `merchant` label, or (a worker's Redis OOMs) one per
 * lane of a trouble that is not the merchant's. Every other metric is a merchant's and carries its ref.
 */
const PROCESS_WIDE = new Set([
  'ingest_redis_memory_headroom_ratio',
  'ingest_connections_cut_total',
  'ingest_connections_admitted_total',
  'ingest_connections_open',
  'ingest_connections_max',
  'ingest_enqueue_batch_size',
  'console_http_requests_total',
  'process_cpu_seconds_total',
  'mcb_redis_up',
  'mcb_redis_down_since_seconds',
  'mcb_worker_commits_stalled',
  'mcb_worker_commit_wait_seconds',
  'mcb_worker_redis_oom_total',
  'mcb_worker_redis_oom_backoff_seconds',
]);

/** Each selector of a merchant's metric in `expr`: its name and its label matchers ('' when it has none). */
function merchantSelectors(expr: string): { metric: string; matchers: string }[] {
  return [...expr.matchAll(/\b((?:mcb|ingest|console)_[a-z0-9_]+)(\{[^}]*\})?/g)]
    .map((m) => ({ metric: m[1]!, matchers: m[2] ?? '' }))
    .filter((s) => !PROCESS_WIDE.has(s.metric.replace(/_(bucket|count|sum)$/, '')));
}

/** GitHub's anchor of a Markdown heading. */
const anchorOf = (heading: string) =>
  heading
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .trim()
    .replace(/\s/g, '-');

describe('deploy/prometheus/alerts.yml and deploy/grafana/dashboard.json', () => {
  // Written reason: developer machines without Debian's prometheus package cannot run promtool; CI always does.
  it.skipIf(!promtool && !process.env.CI)('the rules are valid and their unit tests pass under promtool', () => {
    expect(promtool, 'promtool is not installed (apt-get install prometheus)').toBe(true);
    expect(execFileSync('promtool', ['check', 'rules', 'alerts.yml'], { cwd: dir, encoding: 'utf8' })).toMatch(
      /SUCCESS/,
    );
    expect(execFileSync('promtool', ['test', 'rules', 'alerts.test.yml'], { cwd: dir, encoding: 'utf8' })).toMatch(
      /SUCCESS/,
    );
  });

  it.skipIf(!promtool && !process.env.CI)(
    'every dashboard query parses as PromQL (promtool, as recording rules)',
    () => {
      expect(promtool, 'promtool is not installed (apt-get install prometheus)').toBe(true);
      const file = join(tmp, 'dashboard-queries.yml');
      const recording = panelQueries.map((q, i) => ({ record: `dashboard:query_${i}`, expr: q.expr }));
      writeFileSync(file, JSON.stringify({ groups: [{ name: 'dashboard', rules: recording }] }));
      expect(execFileSync('promtool', ['check', 'rules', file], { encoding: 'utf8' })).toMatch(
        new RegExp(`SUCCESS: ${recording.length} rules found`),
      );
    },
  );

  it('every alert is unit-tested both firing and not firing', () => {
    const tests = (
      parse(readFileSync(join(dir, 'alerts.test.yml'), 'utf8')) as {
        tests: { alert_rule_test: { alertname: string; exp_alerts: unknown[] }[] }[];
      }
    ).tests.flatMap((t) => t.alert_rule_test);
    for (const rule of rules) {
      const cases = tests.filter((t) => t.alertname === rule.alert);
      expect(
        cases.some((c) => c.exp_alerts.length > 0),
        `${rule.alert} never fires in alerts.test.yml`,
      ).toBe(true);
      expect(
        cases.some((c) => c.exp_alerts.length === 0),
        `${rule.alert} is never shown quiet in alerts.test.yml`,
      ).toBe(true);
    }
  });

  it('names only metrics our processes export, in the alerts and on every dashboard panel', () => {
    const exported = exportedMetricNames();
    const used = [
      ...rules.map((r) => ({ where: `alert ${r.alert}`, expr: r.expr })),
      ...panelQueries.map((q) => ({ where: `panel "${q.panel}"`, expr: q.expr })),
    ];
    const unknown = used.flatMap((u) =>
      metricsIn(u.expr)
        .filter((m) => !exported.has(m))
        .map((m) => `${u.where}: ${m}`),
    );
    expect(unknown).toEqual([]);
    expect(used.length).toBeGreaterThan(20);
  });

  it('aggregates every rule about a merchant by merchant, and names the merchant in its summary', () => {
    const perMerchant = rules.filter((r) => merchantSelectors(r.expr).length > 0);
    expect(perMerchant.length).toBeGreaterThanOrEqual(12);
    for (const rule of perMerchant) {
      // Every aggregation keeps the merchant (no deployment-wide sum, ratio or max hides one merchant's trouble).
      const aggregations = [...rule.expr.matchAll(/\b(sum|max|min|avg|count)\b\s*(by\s*\(([^)]*)\))?\s*\(/g)];
      expect(aggregations.length, `${rule.alert} aggregates nothing`).toBeGreaterThan(0);
      for (const a of aggregations)
        expect(a[3]?.split(',').map((l) => l.trim()) ?? [], `${rule.alert}: ${a[0]}`).toContain('merchant');
      expect(rule.annotations.summary, rule.alert).toContain('{{ $labels.merchant }}');
    }
  });

  it('gives the dashboard a merchant variable, and filters every query of a merchant’s metric by it', () => {
    const variable = dashboard.templating.list.find((v) => v.name === 'merchant');
    expect(variable).toMatchObject({ type: 'query', multi: true, includeAll: true });
    // Its values come from a worker's series: configured refs only, never ingest's `_unknown`.
    expect(variable?.definition).toMatch(/^label_values\(mcb_worker_[a-z_]+, merchant\)$/);
    const unfiltered = panelQueries.flatMap((q) =>
      merchantSelectors(q.expr)
        .filter((sel) => !sel.matchers.includes('merchant=~"$merchant"'))
        .map((sel) => `panel "${q.panel}": ${sel.metric}${sel.matchers}`),
    );
    expect(unfiltered).toEqual([]);
    expect(panelQueries.filter((q) => q.expr.includes('$merchant')).length).toBeGreaterThan(20);
  });

  it('links every alert to a section of docs/runbook.md that exists', () => {
    const anchors = new Set(
      [...readFileSync(join(ROOT, 'docs/runbook.md'), 'utf8').matchAll(/^#{2,3} (.+)$/gm)].map((m) => anchorOf(m[1]!)),
    );
    for (const rule of rules) {
      const url = rule.annotations.runbook_url ?? '';
      expect(url, `${rule.alert} has no runbook_url`).toMatch(/^docs\/runbook\.md#/);
      expect(anchors.has(url.split('#')[1]!), `${rule.alert}: no section ${url}`).toBe(true);
    }
  });
});
