import { options, render } from 'preact';
import { afterEach, expect, test } from 'vitest';
import { highlightVersion, loadHighlighter } from '../lib/markdown';
import { Api } from '../lib/api';
import { Controller } from '../lib/controller';
import { useAppState, useHighlightVersion } from './context';

function Shows() {
  return <span>{useHighlightVersion()}</span>;
}

const savedRAF = options.requestAnimationFrame;
afterEach(() => {
  options.requestAnimationFrame = savedRAF;
});

test('markdown rendered just before the highlighter arrives is highlighted once it does', async () => {
  // Hold the effects back, as a busy browser does between paint and effects,
  // and let the highlighter arrive in that gap.
  let effects: (() => void) | undefined;
  options.requestAnimationFrame = (cb) => {
    effects = cb;
  };
  const root = document.createElement('div');
  const before = highlightVersion();
  render(<Shows />, root);
  expect(root.textContent).toBe(String(before));

  await loadHighlighter();
  expect(highlightVersion()).toBeGreaterThan(before);
  effects!();
  await new Promise((r) => setTimeout(r, 0)); // let preact flush the re-render
  expect(root.textContent).toBe(String(highlightVersion()));
  render(null, root);
});

function Toasts({ c }: { c: Controller }) {
  return <span>{useAppState(c).toasts.length}</span>;
}

test('a state change between the first render and its effects is shown', async () => {
  // start() can answer before the browser runs effects: the page must not
  // stay on what it rendered first ("Connecting to Tandem…").
  let effects: (() => void) | undefined;
  options.requestAnimationFrame = (cb) => {
    effects = cb;
  };
  const c = new Controller({ api: new Api('tok'), clientId: 'me', schedule: (f) => f(), route: { get: () => '', set: () => {} } });
  const root = document.createElement('div');
  render(<Toasts c={c} />, root);
  expect(root.textContent).toBe('0');

  c.toast('hello', 'info');
  effects!();
  await new Promise((r) => setTimeout(r, 0));
  expect(root.textContent).toBe('1');
  render(null, root);
});
