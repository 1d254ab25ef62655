import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// The repository stands on its own: a clone has every page README and docs/ send a reader to. README once pointed at
// ../shared/spec/merchant-interface.md and ../shared/DESIGN.md, which no clone has. Every relative link must name a
// committed file (or folder), every #anchor a heading of its page, and no path may climb out of the repository.
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const tracked = execFileSync('git', ['ls-files'], { cwd: ROOT, encoding: 'utf8' }).trim().split('\n');
const trackedSet = new Set(tracked);
const folders = new Set(
  tracked.flatMap((f) =>
    f
      .split('/')
      .slice(0, -1)
      .map((_, i, parts) => parts.slice(0, i + 1).join('/')),
  ),
);
const pages = tracked.filter((f) => f.endsWith('.md') && !f.includes('node_modules'));

/** GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens, repeats numbered. */
function anchorsOf(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  let fenced = false;
  for (const line of markdown.split('\n')) {
    if (/^\s*```/.test(line)) fenced = !fenced;
    const m = fenced ? null : /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!m) continue;
    const base = m[1]!
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  return anchors;
}

/** Link targets of a page: `[text](target)` outside code, without a title. */
function linksOf(markdown: string): string[] {
  const prose = markdown.replace(/```[\s\S]*?```/g, '').replace(/`[^`\n]*`/g, '');
  return [...prose.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)].map((m) => m[1]!);
}

describe('README and docs', () => {
  it('link only to committed files, headings that exist, and nothing outside the repository', () => {
    const broken: string[] = [];
    for (const page of pages) {
      const text = readFileSync(join(ROOT, page), 'utf8');
      for (const target of linksOf(text)) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // http:, https:, mailto:
        const [path = '', anchor] = target.split('#');
        const file = path ? normalize(join(dirname(page), decodeURIComponent(path))).replace(/\/$/, '') : page;
        if (file.startsWith('..') || relative(ROOT, join(ROOT, file)).startsWith('..')) {
          broken.push(`${page}: ${target} is outside the repository`);
        } else if (!trackedSet.has(file) && !folders.has(file)) {
          broken.push(`${page}: ${target} is not a committed file`);
        } else if (anchor && file.endsWith('.md') && !anchorsOf(readFileSync(join(ROOT, file), 'utf8')).has(anchor)) {
          broken.push(`${page}: ${target} names no heading of ${file}`);
        }
      }
      // A path in code quotes that climbs out of the repository is a reference a clone cannot follow either.
      for (const m of text.matchAll(/`(\.\.\/[^`\s]+)`/g)) {
        const file = normalize(join(dirname(page), m[1]!));
        if (file.startsWith('..')) broken.push(`${page}: \`${m[1]}\` is outside the repository`);
      }
    }
    expect(broken).toEqual([]);
  });

  it('catches what it is meant to catch', () => {
    expect(
      linksOf('see [the spec](../shared/spec/merchant-interface.md) and [tls](docs/deployment.md#tls) and `[x](y)`'),
    ).toEqual(['../shared/spec/merchant-interface.md', 'docs/deployment.md#tls']);
    expect(
      anchorsOf(
        '# Ingest\n## Routes (public listener, `INGEST_HOST:INGEST_PORT`)\n## Codec (`@mcb/core/callback`)\n## TLS\n## TLS',
      ),
    ).toEqual(
      new Set(['ingest', 'routes-public-listener-ingest_hostingest_port', 'codec-mcbcorecallback', 'tls', 'tls-1']),
    );
  });
});
