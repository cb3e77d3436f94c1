import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Page } from '@playwright/test';
import { test, expect, watch, openWorkspace, ARTIFACTS, TOKEN } from './harness';

const SHOTS = join(ARTIFACTS, 'screenshots');
const prompt = (p: Page) => p.getByRole('textbox', { name: 'Prompt', exact: true });

const ANSWER = `## What I found

The handler keeps **one EventSource** per workspace and dedupes by \`seq\`:

- events at or below the last seq are dropped
- a \`stream.reset\` refetches over REST

\`\`\`go
func (s *Stream) Next() (Event, error) {
	for ev := range s.events {
		if ev.Seq > s.last {
			s.last = ev.Seq
			return ev, nil
		}
	}
	return Event{}, io.EOF
}
\`\`\`

| file | change |
|---|---|
| stream.go | dedupe |
| api.go | reset |
`;

async function shot(page: Page, name: string) {
  mkdirSync(SHOTS, { recursive: true });
  await page.screenshot({ path: join(SHOTS, `${name}.png`) });
}

// Walks through the main views at desktop and phone widths, light and dark,
// checking what a person relies on (keyboard, no sideways scrolling), and
// leaves screenshots in e2e-artifacts/screenshots (not committed).
test('main views at 1280 and 360 px, light and dark', async ({ env, page, browser }) => {
  const problems = watch(page);
  await page.setViewportSize({ width: 1280, height: 800 });
  await page.goto(env.tandem.url + '/');
  await shot(page, 'token-desktop');

  writeFileSync(join(env.workDir, 'stream.go'), 'package stream\n\nfunc next() {\n\treturn\n}\n');
  await openWorkspace(page, env.tandem.url, env.workDir);
  await page.getByRole('button', { name: '+ New session' }).first().click();

  // Keyboard: Shift+Enter is a new line, Enter sends.
  env.fake.script = (_n, body) => {
    const last = body.messages.at(-1);
    if (last.role === 'tool') return { text: ['The edit is in: `next` now returns early.'] };
    if (/edit/.test(JSON.stringify(last.content))) {
      return {
        reasoning: ['The function body is a bare return; an explicit early return reads better.'],
        text: ['I will edit `stream.go`.'],
        toolCalls: [{ id: 'call_e1', name: 'edit', args: { path: 'stream.go', old_string: '\treturn\n', new_string: '\t// nothing to do yet\n\treturn\n' } }],
      };
    }
    return { reasoning: ['Looking at the stream code first.'], text: [ANSWER.slice(0, 200), ANSWER.slice(200)], toolCalls: [] };
  };
  await prompt(page).click();
  await page.keyboard.type('How does the stream avoid duplicates?');
  await page.keyboard.press('Shift+Enter');
  await page.keyboard.type('Answer briefly.');
  await expect(prompt(page)).toHaveValue('How does the stream avoid duplicates?\nAnswer briefly.');
  await page.keyboard.press('Enter');
  await expect(page.getByTestId('msg-assistant').last()).toContainText('What I found');
  await expect(page.locator('.md pre code.hljs .hljs-keyword').first()).toBeVisible(); // highlighted once loaded
  await expect(page.getByTestId('msg-user').first()).toContainText('Answer briefly.');

  await prompt(page).fill('Now edit stream.go');
  await prompt(page).press('Enter');
  await expect(page.getByTestId('permission')).toBeVisible();
  await expect(page.getByTestId('permission').locator('.d-add')).toContainText('// nothing to do yet');
  await shot(page, 'session-permission-desktop');

  const dark = await browser.newContext({ colorScheme: 'dark', viewport: { width: 1280, height: 800 } });
  const pd = await dark.newPage();
  await pd.goto(`${env.tandem.url}/#token=${TOKEN}&${new URL(page.url()).hash.slice(1)}`);
  await expect(pd.getByTestId('permission')).toBeVisible();
  const bg = await pd.evaluate(() => getComputedStyle(document.body).backgroundColor);
  expect(bg).toBe('rgb(22, 24, 29)'); // the dark palette
  await shot(pd, 'session-permission-desktop-dark');

  // Phone width: no sideways scrolling, the session list is a drawer.
  await page.setViewportSize({ width: 360, height: 740 });
  await expect(page.getByRole('navigation', { name: 'Sessions' })).toBeHidden();
  expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(360);
  await shot(page, 'session-permission-360');
  await page.getByRole('button', { name: 'Sessions' }).click();
  await expect(page.getByRole('navigation', { name: 'Sessions' })).toBeVisible();
  await shot(page, 'drawer-360');
  await page.keyboard.press('Escape');
  await expect(page.getByRole('navigation', { name: 'Sessions' })).toBeHidden();

  // Keyboard only: Tab reaches the approval, Enter gives it.
  await page.getByTestId('permission').getByRole('button', { name: 'Approve once' }).focus();
  await page.keyboard.press('Enter');
  await expect(page.getByTestId('permission-result')).toHaveText('Approved once by you');
  await expect(page.getByTestId('msg-assistant').last()).toContainText('The edit is in');
  await page.locator('[data-testid="tool-card"][data-tool="edit"] .tool-head').click();
  await expect(page.locator('[data-testid="tool-card"][data-tool="edit"] .diff')).toBeVisible();
  expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(360);
  await shot(page, 'session-tool-diff-360');
  await expect(pd.getByTestId('permission')).toHaveCount(0);
  await pd.getByRole('button', { name: 'edit' }).first().click();
  await shot(pd, 'session-tool-diff-desktop-dark');

  await page.setViewportSize({ width: 1280, height: 800 });
  await shot(page, 'session-desktop');
  await page.goto(`${env.tandem.url}/#/`);
  await expect(page.getByLabel('Workspace path')).toBeVisible();
  await shot(page, 'workspaces-desktop');
  await page.setViewportSize({ width: 360, height: 740 });
  await shot(page, 'workspaces-360');

  // Text is selectable.
  expect(await pd.evaluate(() => getComputedStyle(document.querySelector('.md')!).userSelect)).not.toBe('none');
  expect(problems).toEqual([]);
  await dark.close();
});

test('rename and delete a session, switch its model', async ({ env, page }) => {
  await openWorkspace(page, env.tandem.url, env.workDir);
  await page.getByRole('button', { name: '+ New session' }).first().click();
  await expect(page).toHaveURL(/\/s\//);
  const sid = /\/s\/([0-9a-f-]{36})/.exec(page.url())![1];
  const wid = /\/w\/([0-9a-f-]{36})/.exec(page.url())![1];

  await page.getByLabel('Model').fill('openai/other-model');
  await page.getByLabel('Reasoning effort').selectOption('high');
  await page.getByRole('button', { name: 'Switch' }).click();
  await expect(page.locator('.notice')).toContainText('Model changed to openai/other-model (high)');
  const s = await env.tandem.must('GET', `/v1/workspaces/${wid}/sessions/${sid}`);
  expect([s.model, s.reasoning_effort]).toEqual(['openai/other-model', 'high']);

  await page.getByRole('button', { name: 'Session actions' }).click();
  await page.getByRole('menuitem', { name: 'Rename' }).click();
  await page.getByLabel('Session title').fill('Renamed');
  await page.getByLabel('Session title').press('Enter');
  await expect(page.locator('h2.session-title')).toHaveText('Renamed');
  expect((await env.tandem.must('GET', `/v1/workspaces/${wid}/sessions/${sid}`)).title).toBe('Renamed');

  page.once('dialog', (d) => void d.accept());
  await page.getByRole('button', { name: 'Session actions' }).click();
  await page.getByRole('menuitem', { name: 'Delete' }).click();
  await expect(page.getByText('Pick a session, or start a new one.')).toBeVisible();
  expect((await env.tandem.api('GET', `/v1/workspaces/${wid}/sessions/${sid}`)).status).toBe(404);
});
