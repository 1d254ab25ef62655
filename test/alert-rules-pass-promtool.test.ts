import { execFileSync, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// The alerting rules are code: promtool (Debian's prometheus package; .ci/run installs it) checks their syntax and
// runs their unit tests (deploy/prometheus/alerts.test.yml).
const dir = fileURLToPath(new URL('../deploy/prometheus/', import.meta.url));
const promtool = spawnSync('promtool', ['--version'], { encoding: 'utf8' }).status === 0;

describe('deploy/prometheus/alerts.yml', () => {
  // Written reason: developer machines without Debian's prometheus package cannot run promtool; CI always does.
  it.skipIf(!promtool && !process.env.CI)('is valid and its unit tests pass under promtool', () => {
    expect(promtool, 'promtool is not installed (apt-get install prometheus)').toBe(true);
    expect(execFileSync('promtool', ['check', 'rules', 'alerts.yml'], { cwd: dir, encoding: 'utf8' })).toMatch(/SUCCESS/);
    expect(execFileSync('promtool', ['test', 'rules', 'alerts.test.yml'], { cwd: dir, encoding: 'utf8' })).toMatch(/SUCCESS/);
  });
});
