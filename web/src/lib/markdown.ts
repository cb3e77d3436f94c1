// Model and tool output is untrusted: markdown is rendered by marked, with
// raw HTML escaped, and the HTML it makes still goes through DOMPurify before
// it reaches the page. Code
// blocks are highlighted once highlight.js has loaded (lazily, on the first
// code block); until then they show plain.

import { Marked, type Tokens } from 'marked';
import DOMPurify from 'dompurify';

type Highlighter = { highlight(code: string, lang: string): string | null };

let highlighter: Highlighter | null = null;
let loading: Promise<void> | null = null;
const ready = new Set<() => void>();
let version = 0;

/** highlightVersion changes when the highlighter arrives: rendered markdown should be made again. */
export const highlightVersion = () => version;

export function onHighlighterReady(f: () => void) {
  ready.add(f);
  return () => ready.delete(f);
}

export function loadHighlighter(): Promise<void> {
  if (!loading) {
    loading = import('./highlight')
      .then((m) => {
        highlighter = m;
        version++;
        for (const f of ready) f();
      })
      .catch(() => {
        loading = null; // try again with the next code block
      });
  }
  return loading;
}

const escapeHTML = (s: string) =>
  s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&#39;');

const marked = new Marked({
  gfm: true,
  breaks: false,
  renderer: {
    // Raw HTML in an answer is shown as the text it is, not rendered: an
    // agent's HTML is nearly always an example, and untrusted either way.
    html({ text }: Tokens.HTML | Tokens.Tag) {
      return escapeHTML(text);
    },
    code({ text, lang }: Tokens.Code) {
      const language = (lang ?? '').trim().split(/\s+/)[0].toLowerCase();
      let html: string | null = null;
      if (highlighter) html = highlighter.highlight(text, language);
      else void loadHighlighter();
      const cls = language ? ` class="hljs language-${escapeHTML(language)}"` : ' class="hljs"';
      return `<pre><code${cls}>${html ?? escapeHTML(text)}</code></pre>\n`;
    },
  },
});

let hooked = false;
function hookPurifier() {
  if (hooked) return;
  hooked = true;
  DOMPurify.addHook('afterSanitizeAttributes', (node) => {
    if (node.tagName === 'A') {
      const href = node.getAttribute('href') ?? '';
      if (/^(https?:|mailto:)/i.test(href)) {
        node.setAttribute('target', '_blank');
        node.setAttribute('rel', 'noopener noreferrer nofollow');
      } else if (!href.startsWith('#')) {
        node.removeAttribute('href');
      }
    }
  });
}

const PURIFY = {
  USE_PROFILES: { html: true },
  FORBID_TAGS: ['style', 'form', 'input', 'button', 'textarea', 'select', 'iframe', 'object', 'embed', 'svg', 'math'],
  FORBID_ATTR: ['style', 'srcset', 'formaction', 'action'],
  ALLOW_DATA_ATTR: false,
};

/** sanitize makes untrusted HTML safe to insert. */
export function sanitize(html: string): string {
  hookPurifier();
  return DOMPurify.sanitize(html, PURIFY) as unknown as string;
}

// Rows scrolled back into view render again: parsing and sanitizing is the
// cost of a row, so the last results are kept (keyed by the highlighter's
// state too, since a loaded highlighter changes code blocks).
const cache = new Map<string, string>();
const CACHE_ENTRIES = 400;

/** renderMarkdown turns untrusted markdown into safe HTML. */
export function renderMarkdown(src: string): string {
  const key = (highlighter ? 'h:' : 'p:') + src;
  const hit = cache.get(key);
  if (hit !== undefined) {
    cache.delete(key);
    cache.set(key, hit);
    return hit;
  }
  const html = sanitize(marked.parse(src, { async: false }) as string);
  cache.set(key, html);
  if (cache.size > CACHE_ENTRIES) cache.delete(cache.keys().next().value!);
  return html;
}

export { escapeHTML };
