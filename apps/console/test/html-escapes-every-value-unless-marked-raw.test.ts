import { describe, expect, it } from 'vitest';
import { html, raw } from '../src/web/html.ts';
import { layout } from '../src/web/layout.ts';

describe('the html tag', () => {
  it('escapes text in content and attributes, passes Html through, joins arrays and renders nothing for null and false', () => {
    const evil = `<script>alert("x")</script>' onmouseover='y' \``;
    const out = html`<a title="${evil}">${evil}</a>${[html`<b>${'&'}</b>`, '<i>']}${null}${undefined}${false}${0}`
      .value;
    expect(out).toBe(
      '<a title="&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&#39; onmouseover=&#39;y&#39; &#96;">' +
        '&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&#39; onmouseover=&#39;y&#39; &#96;</a><b>&amp;</b>&lt;i&gt;0',
    );
    expect(html`${raw('<hr>')}`.value).toBe('<hr>');
  });

  it('escapes the operator name and the flash line in the layout', () => {
    const page = layout(
      {
        title: '<t>',
        operator: { name: '<img src=x onerror=1>', role: 'viewer' },
        flash: { kind: 'error', text: '<b>no</b>' },
      },
      html`<p>body</p>`,
    ).value;
    expect(page).not.toContain('<img');
    expect(page).not.toContain('<b>no');
    expect(page).toContain('&lt;img src=x onerror=1&gt;');
    expect(page).toContain('<title>&lt;t&gt; · Merchant console</title>');
  });
});
