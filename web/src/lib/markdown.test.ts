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
    for (const p of payloads) {
      const html = renderMarkdown(p);
      expect(html, p).not.toMatch(/<script|onerror|onload|onclick|javascript:|<iframe|style=|<form/i);
    }
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
