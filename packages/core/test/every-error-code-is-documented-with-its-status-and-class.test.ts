import { readFileSync } from 'node:fs';
import { ERROR_CATALOGUE, type ErrorCode } from '@mcb/core/errors';
import { describe, expect, it } from 'vitest';

// docs/errors.md is held to the catalogue both ways, as fastify's test holds docs/Reference/Errors.md to
// lib/errors.js: a code missing from the doc, a row for no code, a status or class the doc says otherwise.

interface DocRow {
  code: string;
  status: string;
  retry: string;
}

/** The rows of the doc's table: `| \`CODE\` | status | class | where | meaning |`. */
function docRows(): DocRow[] {
  const text = readFileSync(new URL('../../../docs/errors.md', import.meta.url), 'utf8');
  return text
    .split('\n')
    .filter((line) => line.startsWith('| `'))
    .map((line) => {
      const [code = '', status = '', retry = ''] = line
        .split('|')
        .slice(1, 4)
        .map((cell) => cell.trim());
      return { code: code.replace(/^`|`$/g, ''), status, retry };
    });
}

const rows = docRows();
const catalogued = Object.keys(ERROR_CATALOGUE) as ErrorCode[];

describe('docs/errors.md and the error catalogue', () => {
  it('has a table to read (a change of its layout must change this test too)', () => {
    expect(rows.length).toBeGreaterThan(40);
  });

  it('documents every code of the catalogue, once', () => {
    const documented = rows.map((r) => r.code);
    expect(catalogued.filter((code) => !documented.includes(code))).toEqual([]);
    expect(documented.filter((code, i) => documented.indexOf(code) !== i)).toEqual([]);
  });

  it('has no row for a code the catalogue does not have', () => {
    expect(rows.map((r) => r.code).filter((code) => !(code in ERROR_CATALOGUE))).toEqual([]);
  });

  it("gives each code the catalogue's status and retry class", () => {
    const differing = rows
      .filter((r) => r.code in ERROR_CATALOGUE)
      .filter((r) => {
        const spec = ERROR_CATALOGUE[r.code as ErrorCode];
        return r.status !== String(spec.status) || r.retry !== spec.retry;
      })
      .map(
        (r) =>
          `${r.code}: doc ${r.status} ${r.retry}, catalogue ${JSON.stringify(ERROR_CATALOGUE[r.code as ErrorCode])}`,
      );
    expect(differing).toEqual([]);
  });
});
