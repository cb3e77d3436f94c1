import type { Page } from '@playwright/test';
import { test, expect, gate, watch, openWorkspace, shot, twoPagesOnANewSession, TOKEN } from './harness';
import { fmtTokens, formatUsage } from '../src/lib/state';

// The fake model gets a window and prices from the server's configuration
// (USD per million tokens), so usage, cost and context fill are known.
test.use({ tandemConfig: { models: { 'openai/fake': { context_window: 16000, input_price: 2, output_price: 8 } } } });

const prompt = (p: Page) => p.getByRole('textbox', { name: 'Prompt', exact: true });

async function newSession(page: Page, base: string, dir: string) {
  await openWorkspace(page, base, dir);
  await page.getByRole('button', { name: '+ New session' }).first().click();
  await expect(page).toHaveURL(/\/s\/[0-9a-f-]{36}$/);
  const hash = new URL(page.url()).hash.slice(1);
  return { hash, wid: /\/w\/([0-9a-f-]{36})/.exec(hash)![1], sid: /\/s\/([0-9a-f-]{36})/.exec(hash)![1] };
}

async function send(page: Page, text: string) {
  await prompt(page).fill(text);
  await prompt(page).press('Enter');
}

/** openCompactionSettings opens the session's compaction settings from its menu. */
async function openCompactionSettings(page: Page) {
  await page.getByRole('button', { name: 'Session actions' }).click();
  await page.getByRole('menuitem', { name: 'Compaction settings…' }).click();
  const form = page.getByRole('form', { name: 'Compaction settings' });
  await expect(form).toBeVisible();
  return {
    form,
    auto: form.getByRole('checkbox', { name: 'Compact automatically' }),
    threshold: form.getByRole('textbox', { name: 'Threshold, percent of the context window' }),
    save: form.getByRole('button', { name: 'Save' }),
  };
}

/** fill is the context meter's value, 0..1. */
async function fill(page: Page) {
  return Number(await page.getByTestId('context-fill').locator('meter').getAttribute('value'));
}

// Each model request's usage and cost under its message, the run's total
// under its last, the session's totals and context fill in the header: the
// numbers the model reported, priced as configured, on this page and on one
// opened later.
test('usage, cost and context fill after runs', async ({ env, page, browser }) => {
  const problems = watch(page);
  const { hash, wid, sid } = await newSession(page, env.tandem.url, env.workDir);
  // A session that never ran: an estimate of its system prompt, no usage yet.
  await expect(page.getByTestId('context-fill')).toContainText('/16k');
  await expect(page.getByTestId('usage')).toHaveCount(0);

  // One step: 4,000 in at $2/M and 500 out at $8/M is $0.012.
  env.fake.script = () => ({ text: ['Short answer.'], usage: { input: 4000, output: 500 } });
  await send(page, 'First question');
  const first = page.getByTestId('msg-assistant').last();
  await expect(first).toContainText('Short answer.');
  await expect(first.getByTestId('msg-usage')).toHaveText('4.0k in · 500 out · $0.012');
  await expect(page.getByTestId('usage')).toHaveText('4.0k in · 500 out · $0.012'); // the run is over
  await expect(first.getByTestId('run-usage')).toHaveCount(0); // one request: the run's total is the message's

  // Two steps, a tool call then the answer: each its own, the run's sum under the last.
  const [held, release] = gate();
  env.fake.script = (_n, body) =>
    body.messages.at(-1).role === 'tool'
      ? { text: ['Listed', ' them.'], usage: { input: 5500, output: 300 }, holdAfter: 1, gate: held }
      : { text: ['Listing.'], toolCalls: [{ id: 'call_ls', name: 'ls', args: {} }], usage: { input: 5000, output: 200, cacheRead: 1000 } };
  await send(page, 'List the files');
  const last = page.getByTestId('msg-assistant').last();
  await expect(last).toContainText('Listed');
  // While the run goes on, the header already counts its first step, and
  // the context fill is what that step read and wrote.
  await expect(page.getByTestId('usage')).toContainText('9.0k in · 700 out · 1.0k cached · $');
  await expect(page.getByTestId('context-fill')).toContainText('5.2k/16k (33%)');
  release();
  await expect(last).toContainText('Listed them.');
  const step1 = page.getByTestId('msg-assistant').nth(1);
  // 4,000 uncached at $2/M plus 1,000 read from the cache: the server prices them.
  await expect(step1.getByTestId('msg-usage')).toContainText('5.0k in · 200 out · 1.0k cached · $');
  await expect(last.getByTestId('msg-usage')).toHaveText('5.5k in · 300 out · $0.013');
  await expect(last.getByTestId('run-usage')).toContainText('run: 11k in · 500 out · 1.0k cached · $');

  // The header holds the session's totals and context fill, as the server reports them.
  const s = await env.tandem.must('GET', `/v1/workspaces/${wid}/sessions/${sid}`);
  expect([s.usage.input_tokens, s.usage.output_tokens, s.usage.cache_read_tokens]).toEqual([14500, 1000, 1000]);
  expect(s.usage.cost_usd).toBeGreaterThan(0.03);
  const cost = '$' + s.usage.cost_usd.toFixed(3);
  await expect(page.getByTestId('usage')).toHaveText(`15k in · 1.0k out · 1.0k cached · ${cost}`);
  expect(s.context.window).toBe(16000);
  await expect(page.getByTestId('context-fill')).toContainText(`${fmtTokens(s.context.tokens)}/16k (${Math.round((s.context.tokens / 16000) * 100)}%)`);
  expect(await fill(page)).toBeCloseTo(s.context.tokens / 16000, 3);
  await shot(page, 'usage-desktop');
  await page.setViewportSize({ width: 360, height: 740 });
  await expect(page.getByRole('navigation', { name: 'Sessions' })).toBeHidden(); // a drawer at this width
  expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(360);
  await shot(page, 'usage-360');

  // Another page, opened afterwards, builds the same from the history.
  const other = await browser.newContext();
  const p2 = await other.newPage();
  await p2.goto(`${env.tandem.url}/#token=${TOKEN}&${hash}`);
  await expect(p2.getByTestId('usage')).toHaveText(`15k in · 1.0k out · 1.0k cached · ${cost}`);
  await expect(p2.getByTestId('msg-assistant').last().getByTestId('run-usage')).toContainText('run: 11k in · 500 out');
  await expect(p2.getByTestId('msg-assistant').first().getByTestId('msg-usage')).toHaveText('4.0k in · 500 out · $0.012');
  await other.close();
  expect(problems).toEqual([]);
});

// "Compact now": with nothing to compact it fails and says the history is
// unchanged; after a long answer it summarizes the conversation, shows the
// summary and the compaction, and the context fill drops.
test('compact now shows the compaction and the context fill drops', async ({ env, page }) => {
  const problems = watch(page);
  const { wid, sid } = await newSession(page, env.tandem.url, env.workDir);
  const compactNow = async () => {
    await page.getByRole('button', { name: 'Session actions' }).click();
    await page.getByRole('menuitem', { name: 'Compact now' }).click();
  };

  await compactNow();
  await expect(page.locator('.notice-error')).toContainText(/Compaction failed: nothing to compact[^]*\. The history is unchanged\.$/);
  await expect(page.getByTestId('queue')).toHaveCount(0); // nothing left "Compacting…"

  // A conversation that fills most of the window (under the 0.8 that
  // compacts on its own). The model reports what it reads and writes, about
  // 4 bytes a token: 30 kB of answer is some 7,500 tokens.
  env.fake.script = (_n, body) => {
    if (JSON.stringify(body.messages).includes('You summarize a conversation')) {
      return { text: ['The user asked for a long report; it was written.'] };
    }
    return { text: ['A long report. '.repeat(2000)] };
  };
  await send(page, 'Write a long report');
  await expect(page.getByTestId('msg-assistant').last()).toContainText('A long report.');
  await expect.poll(() => fill(page)).toBeGreaterThan(0.5);
  const before = await fill(page);
  expect(before).toBeLessThan(0.8);
  const s0 = await env.tandem.must('GET', `/v1/workspaces/${wid}/sessions/${sid}`);

  await compactNow();
  await expect(page.locator('.notice').filter({ hasText: 'Compacted the conversation:' })).toBeVisible();
  await expect(page.locator('.notice').filter({ hasText: /Compacting the conversation \(\d+k tokens\)…/ })).toBeVisible();
  const summary = page.locator('details.summary');
  await expect(summary).toContainText('Summary of the earlier conversation');
  await summary.locator('summary').click();
  await expect(summary).toContainText('The user asked for a long report; it was written.');
  await expect(page.getByTestId('queue')).toHaveCount(0);
  await expect.poll(() => fill(page)).toBeLessThan(before / 2);
  await shot(page, 'compaction-desktop');
  // The summary request is usage of the session like any other.
  const s = await env.tandem.must('GET', `/v1/workspaces/${wid}/sessions/${sid}`);
  await expect(page.getByTestId('usage')).toHaveText(formatUsage(s.usage)!);
  expect(s.usage.input_tokens).toBeGreaterThan(s0.usage.input_tokens);
  expect(await fill(page)).toBeCloseTo(s.context.tokens / 16000, 3);

  // Auto-compaction can be turned off (and on again) for the session.
  await expect(page.getByTestId('auto-compaction-off')).toHaveCount(0);
  const settings = await openCompactionSettings(page);
  await settings.auto.uncheck();
  await settings.save.click();
  await expect(page.getByTestId('auto-compaction-off')).toBeVisible();
  expect((await env.tandem.must('GET', `/v1/workspaces/${wid}/sessions/${sid}`)).compaction).toEqual({ auto: false, threshold: 0.8 });
  await openCompactionSettings(page);
  await settings.auto.check();
  await settings.save.click();
  await expect(page.getByTestId('auto-compaction-off')).toHaveCount(0);
  expect((await env.tandem.must('GET', `/v1/workspaces/${wid}/sessions/${sid}`)).compaction.auto).toBe(true);

  // The next prompt reads the summary, not the conversation.
  env.fake.script = () => ({ text: ['Carrying on.'] });
  await send(page, 'Go on');
  await expect(page.getByTestId('msg-assistant').last()).toContainText('Carrying on.');
  const sent = env.fake.requests.at(-1).messages;
  expect(JSON.stringify(sent)).toContain('The user asked for a long report');
  expect(JSON.stringify(sent)).not.toContain('A long report. A long report.');

  // A compaction whose summary request fails says so, changes nothing, and
  // leaves no "Compacting…" behind for the next run.
  const summaries = page.locator('details.summary');
  await expect(summaries).toHaveCount(1);
  env.fake.script = (_n, body) =>
    JSON.stringify(body.messages).includes('You summarize a conversation') ? { status: 400 } : { text: ['Unused.'] };
  await compactNow();
  await expect(page.locator('.notice-error').last()).toContainText(/Compaction failed: .*400.*\. The history is unchanged\.$/);
  await expect(summaries).toHaveCount(1);
  const [held, release] = gate();
  env.fake.script = () => ({ text: ['Working on it', ' now.'], holdAfter: 1, gate: held });
  await send(page, 'One more thing');
  await expect(page.locator('[data-testid="msg-assistant"][aria-busy="true"]')).toContainText('Working on it');
  await expect(page.getByTestId('queue')).toContainText('Working');
  await expect(page.getByTestId('queue')).not.toContainText('Compacting');
  release();
  await expect(page.getByTestId('msg-assistant').last()).toContainText('Working on it now.');
  expect(problems).toEqual([]);
});

// The compaction settings edited on one page show on another at once (the
// server's session.updated); a threshold out of range is refused before it
// is sent.
test('compaction settings changed on one page show live on another', async ({ env, page }) => {
  const { b, ctxB, wid, sid, problemsA, problemsB } = await twoPagesOnANewSession(page, env.tandem.url, env.workDir);
  await expect(b.getByTestId('auto-compaction-off')).toHaveCount(0);
  const onB = await openCompactionSettings(b); // left open: it follows A's change

  const a = await openCompactionSettings(page);
  await expect(a.auto).toBeChecked();
  await expect(a.threshold).toHaveValue('80');
  await a.threshold.fill('0');
  await a.save.click();
  await expect(a.form.getByRole('alert')).toContainText('above 0 and at most 100');
  await a.threshold.fill('65');
  await a.save.click();
  await expect(a.form).toHaveCount(0);
  await expect(page.getByTestId('compaction-threshold')).toHaveText('compacts at 65%');
  expect((await env.tandem.must('GET', `/v1/workspaces/${wid}/sessions/${sid}`)).compaction).toEqual({ auto: true, threshold: 0.65 });

  await expect(b.getByTestId('compaction-threshold')).toHaveText('compacts at 65%');
  await expect(onB.threshold).toHaveValue('65');
  await onB.auto.uncheck();
  await onB.save.click();
  await expect(page.getByTestId('auto-compaction-off')).toBeVisible();
  await expect(page.getByTestId('compaction-threshold')).toHaveCount(0);
  await ctxB.close();
  expect(problemsA).toEqual([]);
  expect(problemsB).toEqual([]);
});
