import { describe, expect, it } from 'vitest';
import { renderMarkdown, sanitize } from './markdown';

describe('renderMarkdown', () => {
  it('renders markdown', () => {
    const html = renderMarkdown('# Title\n\nsome **bold** and `code`\n\n- a\n- b');
    expect(html).toContain('<h1>Title</h1>');
    expect(html).toContain('<strong>bold</strong>');
    expect(html).toContain('<code>code</code>');
    expect(html).toContain('<li>a</li>');
  });

  it('removes scripts and event handlers from untrusted output', () => {
    const payloads = [
      '<script>window.pwned = 1</script>',
      '<img src=x onerror="window.pwned = 1">',
      '<svg onload="window.pwned=1"><circle/></svg>',
      '<a href="javascript:window.pwned=1">click</a>',
      '<iframe src="javascript:window.pwned=1"></iframe>',
      '[link](javascript:window.pwned=1)',
      '<div style="background:url(javascript:alert(1))" onclick="window.pwned=1">x</div>',
      '<form action="javascript:alert(1)"><button>go</button></form>',
    ];
    const dangerous = (html: string) => {
      const el = document.createElement('div');
      el.innerHTML = html;
      const bad: string[] = [];
      for (const n of el.querySelectorAll('*')) {
        if (/^(script|iframe|svg|form|style|object|embed)$/i.test(n.tagName)) bad.push(n.tagName);
        for (const a of n.attributes) {
          if (/^on/i.test(a.name) || a.name === 'style' || /^\s*javascript:/i.test(a.value)) bad.push(`${n.tagName} ${a.name}`);
        }
      }
      return bad;
    };
    for (const p of payloads) {
      // Through markdown (raw HTML is escaped) and, as a second line, the sanitizer on raw HTML.
      expect(dangerous(renderMarkdown(p)), p).toEqual([]);
      expect(dangerous(sanitize(p)), p).toEqual([]);
    }
  });

  it('shows raw HTML as text', () => {
    const el = document.createElement('div');
    el.innerHTML = renderMarkdown('Use <b>bold</b> or <img src=x onerror=alert(1)>');
    expect(el.querySelector('b, img')).toBeNull();
    expect(el.textContent).toContain('<b>bold</b>');
    expect(el.textContent).toContain('<img src=x onerror=alert(1)>');
  });

  it('escapes code blocks before any highlighter runs', () => {
    const html = renderMarkdown('```html\n<script>alert(1)</script>\n```');
    expect(html).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
    expect(html).not.toContain('<script>');
  });

  it('opens web links in a new tab without a referrer', () => {
    const html = renderMarkdown('[site](https://example.com)');
    expect(html).toContain('target="_blank"');
    expect(html).toContain('rel="noopener noreferrer nofollow"');
  });

  it('sanitize leaves the DOM it parses inert', () => {
    const el = document.createElement('div');
    el.innerHTML = sanitize('<img src="data:," onerror="window.pwned=1"><p>ok</p>');
    expect(el.querySelector('img')?.getAttribute('onerror')).toBeNull();
    expect(el.textContent).toBe('ok');
  });
});
