import type { Page } from '@playwright/test';
import { test, expect, watch, openWorkspace, CutProxy, TOKEN } from './harness';

const words = (n: number) => Array.from({ length: n }, (_, i) => `w${String(i).padStart(2, '0')} `);
const prompt = (p: Page) => p.getByRole('textbox', { name: 'Prompt', exact: true });

/**
 * watchNoDuplicate samples the streaming answer until stop() and records any
 * moment where a word shows twice: a replayed delta appended again.
 */
function watchNoDuplicate(page: Page) {
  let running = true;
  const seen: string[] = [];
  const loop = (async () => {
    while (running) {
      const text = await page
        .getByTestId('msg-assistant')
        .last()
        .innerText()
        .catch(() => '');
      const ws = text.match(/w\d\d/g) ?? [];
      if (new Set(ws).size !== ws.length) seen.push(text);
      await page.waitForTimeout(40);
    }
  })();
  return async () => {
    running = false;
    await loop;
    return seen;
  };
}

test('a cut stream reconnects with Last-Event-ID: the whole answer once, no duplicate, no gap', async ({ env, page }) => {
  const proxy = await CutProxy.start(env.tandem.port);
  const problems = watch(page);
  await openWorkspace(page, proxy.url, env.workDir);
  await page.getByRole('button', { name: '+ New session' }).first().click();
  const all = words(30);
  env.fake.script = () => ({ text: all, delay: 100 });
  await prompt(page).fill('Count slowly');
  await prompt(page).press('Enter');
  const streaming = page.locator('[data-testid="msg-assistant"][aria-busy="true"]');
  await expect(streaming).toContainText('w05');
  const stop = watchNoDuplicate(page);

  proxy.cut();
  await expect(page.getByTestId('conn')).not.toHaveAttribute('data-state', 'live');
  await expect(page.getByTestId('conn')).toHaveAttribute('data-state', 'live', { timeout: 30_000 });

  await expect(page.getByTestId('msg-assistant').last()).not.toHaveAttribute('aria-busy', 'true', { timeout: 30_000 });
  expect(await stop()).toEqual([]);
  await expect(page.getByTestId('msg-assistant')).toHaveCount(1);
  await expect(page.getByTestId('msg-user')).toHaveCount(1);
  const text = await page.getByTestId('msg-assistant').locator('.md').innerText();
  expect(text.trim()).toBe(all.join('').trim());
  expect(problems).toEqual([]);
  await proxy.close();
});

test('the server stops mid-run and comes back: the page follows without a reload', async ({ env, page }) => {
  const problems = watch(page);
  await openWorkspace(page, env.tandem.url, env.workDir);
  await page.getByRole('button', { name: '+ New session' }).first().click();
  await expect(page).toHaveURL(/\/s\/[0-9a-f-]{36}$/);
  const sessionURL = page.url();
  await page.evaluate(() => ((window as any).__sameDocument = true));
  env.fake.script = () => ({ text: words(40), delay: 100 });
  await prompt(page).fill('Count slowly');
  await prompt(page).press('Enter');
  await expect(page.locator('[data-testid="msg-assistant"][aria-busy="true"]')).toContainText('w05');
  const stop = watchNoDuplicate(page);

  // A clean stop cancels the run and keeps what was streamed; the page sees
  // the server go and, once it is back on the same address, catches up.
  const down = env.tandem.stop();
  await expect(page.getByTestId('conn')).not.toHaveAttribute('data-state', 'live');
  await down;
  await env.restart();
  await expect(page.getByTestId('conn')).toHaveAttribute('data-state', 'live', { timeout: 30_000 });
  await expect(page.getByTestId('finish').last()).toHaveText('Canceled');
  expect(await stop()).toEqual([]);

  const wid = /#\/w\/([0-9a-f-]{36})/.exec(sessionURL)![1];
  const sid = /\/s\/([0-9a-f-]{36})/.exec(sessionURL)![1];
  const { messages } = await env.tandem.must('GET', `/v1/workspaces/${wid}/sessions/${sid}/messages`);
  const stored = messages.filter((m: any) => m.role === 'assistant')[0];
  const storedText = stored.parts.filter((p: any) => p.type === 'text').map((p: any) => p.text).join('');
  expect(storedText).toMatch(/^w00 w01 w02 w03 w04 w05 /);
  await expect(page.getByTestId('msg-assistant')).toHaveCount(1);
  await expect(page.getByTestId('msg-user')).toHaveCount(1);
  expect((await page.getByTestId('msg-assistant').locator('.md').innerText()).trim()).toBe(storedText.trim());
  await expect(page.locator('.banner')).toHaveCount(0);

  // The same page goes on working.
  env.fake.script = () => ({ text: ['Back ', 'again.'] });
  await prompt(page).fill('Are you back?');
  await prompt(page).press('Enter');
  await expect(page.getByTestId('msg-assistant').last()).toContainText('Back again.');
  expect(await page.evaluate(() => (window as any).__sameDocument)).toBe(true);
  expect(problems).toEqual([]);
});

test('a reload keeps the token and the place', async ({ env, page }) => {
  await openWorkspace(page, env.tandem.url, env.workDir);
  await page.getByRole('button', { name: '+ New session' }).first().click();
  env.fake.script = () => ({ text: ['Remembered.'] });
  await prompt(page).fill('Remember this');
  await prompt(page).press('Enter');
  await expect(page.getByTestId('msg-assistant').last()).toContainText('Remembered.');
  expect(page.url()).not.toContain(TOKEN);
  await page.reload();
  await expect(page.getByTestId('msg-assistant').last()).toContainText('Remembered.');
  await expect(page.getByTestId('msg-user')).toHaveCount(1);
});
