import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test, expect, gate, watch, openWorkspace, clientIdOf, twoPagesOnANewSession, TOKEN } from './harness';

// Two people on one workspace, each in a browser context of their own: what
// one does, the other sees live, and either can answer or stop the other's work.
test('two browsers drive one session together', async ({ env, page, browser }) => {
  const a = page;
  const problemsA = watch(a);
  await openWorkspace(a, env.tandem.url, env.workDir);
  await a.getByRole('button', { name: '+ New session' }).first().click();
  await expect(a.getByRole('textbox', { name: 'Prompt', exact: true })).toBeVisible();
  await expect(a).toHaveURL(/\/s\/[0-9a-f-]{36}$/);
  const sessionURL = a.url();
  expect(sessionURL).toMatch(/#\/w\/[0-9a-f-]{36}\/s\/[0-9a-f-]{36}$/);

  const ctxB = await browser.newContext();
  const b = await ctxB.newPage();
  const problemsB = watch(b);
  await b.goto(`${env.tandem.url}/#token=${TOKEN}`);
  // B finds the workspace in the list and the session in the sidebar.
  await b.getByRole('link', { name: new RegExp(env.workDir.replace(/[/.]/g, '\\$&')) }).click();
  await b.getByRole('navigation', { name: 'Sessions' }).getByRole('link').first().click();
  await expect(b.getByRole('textbox', { name: 'Prompt', exact: true })).toBeVisible();
  expect(b.url()).toBe(sessionURL.replace(/#token=[^&]*&?/, ''));
  const idA = await clientIdOf(a);
  const idB = await clientIdOf(b);

  // Presence: each sees two attached.
  // A saw B attach, so A can name B; B only gets the count of those before it.
  await expect(a.getByTestId('presence')).toContainText('2 attached');
  await expect(a.getByTestId('presence')).toContainText(idB.slice(0, 4));
  await expect(b.getByTestId('presence')).toContainText('2 attached');

  // 1. A prompts; B sees the answer stream in, token by token.
  const [held, release] = gate();
  env.fake.script = () => ({ text: ['The answer ', 'is ', 'forty', '-two.'], holdAfter: 2, gate: held });
  await a.getByRole('textbox', { name: 'Prompt', exact: true }).fill('What is the answer?');
  await a.getByRole('textbox', { name: 'Prompt', exact: true }).press('Enter');
  const streamingB = b.locator('[data-testid="msg-assistant"][aria-busy="true"]');
  await expect(streamingB).toContainText('The answer is');
  await expect(streamingB).not.toContainText('forty');
  // B sees who sent the prompt.
  await expect(b.getByTestId('msg-user').last()).toContainText(`client ${idA.slice(0, 4)}`);
  await expect(a.getByTestId('msg-user').last()).toContainText('you');
  release();
  await expect(b.getByTestId('msg-assistant').last()).toContainText('The answer is forty-two.');
  await expect(b.locator('[data-testid="msg-assistant"][aria-busy="true"]')).toHaveCount(0);
  await expect(a.getByTestId('msg-assistant').last()).toContainText('The answer is forty-two.');

  // 2. A asks for a write; B approves it; A sees it approved, by B.
  env.fake.script = (_n, body) => {
    const last = body.messages.at(-1);
    if (last.role === 'tool') return { text: ['Wrote notes.txt.'] };
    return { text: ['Writing the file.'], toolCalls: [{ id: 'call_w1', name: 'write', args: { path: 'notes.txt', content: 'hello\nfrom tandem\n' } }] };
  };
  await a.getByRole('textbox', { name: 'Prompt', exact: true }).fill('Write notes.txt');
  await a.getByRole('textbox', { name: 'Prompt', exact: true }).press('Enter');
  const permB = b.getByTestId('permission');
  await expect(permB).toContainText('notes.txt');
  await expect(permB.locator('.diff')).toContainText('+from tandem');
  await expect(a.getByTestId('permission')).toBeVisible();
  await permB.getByRole('button', { name: 'Approve once' }).click();
  const cardA = a.locator('[data-testid="tool-card"][data-tool="write"]');
  await expect(cardA.getByTestId('permission-result')).toHaveText(`Approved once by client ${idB.slice(0, 4)}`);
  await expect(b.locator('[data-testid="tool-card"][data-tool="write"]').getByTestId('permission-result')).toHaveText('Approved once by you');
  await expect(a.getByTestId('permission')).toHaveCount(0);
  await expect(a.getByTestId('msg-assistant').last()).toContainText('Wrote notes.txt.');
  await expect(cardA).toHaveAttribute('data-status', 'done');
  expect(readFileSync(join(env.workDir, 'notes.txt'), 'utf8')).toBe('hello\nfrom tandem\n');

  // 3. B starts a long answer; A cancels it (Esc); both see it canceled.
  const [never] = gate();
  env.fake.script = () => ({ text: ['Thinking about ', 'it for a long time'], holdAfter: 1, gate: never });
  await b.getByRole('textbox', { name: 'Prompt', exact: true }).fill('Take your time');
  await b.getByRole('textbox', { name: 'Prompt', exact: true }).press('Enter');
  await expect(a.locator('[data-testid="msg-assistant"][aria-busy="true"]')).toContainText('Thinking about');
  await expect(a.getByTestId('queue')).toContainText(`prompted by client ${idB.slice(0, 4)}`);
  await a.keyboard.press('Escape');
  await expect(b.getByTestId('finish').last()).toHaveText('Canceled');
  await expect(a.getByTestId('finish').last()).toHaveText('Canceled');
  await expect(b.getByTestId('cancel')).toHaveCount(0);

  // The session goes on: B prompts again and both see the answer.
  env.fake.script = () => ({ text: ['Back again.'] });
  await b.getByRole('textbox', { name: 'Prompt', exact: true }).fill('Still there?');
  await b.getByRole('textbox', { name: 'Prompt', exact: true }).press('Enter');
  await expect(a.getByTestId('msg-assistant').last()).toContainText('Back again.');

  // The history is the same for both, and matches the server's.
  const wid = /#\/w\/([0-9a-f-]{36})/.exec(sessionURL)![1];
  const sid = /\/s\/([0-9a-f-]{36})/.exec(sessionURL)![1];
  const { messages } = await env.tandem.must(`GET`, `/v1/workspaces/${wid}/sessions/${sid}/messages`);
  const users = messages.filter((m: any) => m.role === 'user').length;
  await expect(a.getByTestId('msg-user')).toHaveCount(users);
  await expect(b.getByTestId('msg-user')).toHaveCount(users);

  expect(problemsA).toEqual([]);
  expect(problemsB).toEqual([]);
  await ctxB.close();
});

// A rename or a model switch on one page shows on the other at once: in its
// header and its session list, without a reload, and its fields follow (a
// rename starts from the current title; no stale model offers a switch).
test('a rename and a model switch on one page show on the other live', async ({ env, page }) => {
  const a = page;
  const { b, ctxB, wid, sid, problemsA, problemsB } = await twoPagesOnANewSession(a, env.tandem.url, env.workDir);
  const before = await b.locator('h2.session-title').innerText();
  expect(before).not.toBe('Release checklist');

  await a.getByRole('button', { name: 'Session actions' }).click();
  await a.getByRole('menuitem', { name: 'Rename' }).click();
  await a.getByLabel('Session title').fill('Release checklist');
  await a.getByLabel('Session title').press('Enter');
  await expect(a.locator('h2.session-title')).toHaveText('Release checklist');

  await expect(b.locator('h2.session-title')).toHaveText('Release checklist');
  const listB = b.getByRole('navigation', { name: 'Sessions' }).getByRole('link');
  await expect(listB).toHaveCount(1);
  await expect(listB).toContainText('Release checklist');
  await expect(listB).not.toContainText(before);
  const s = await env.tandem.must('GET', `/v1/workspaces/${wid}/sessions/${sid}`);
  expect(s.title).toBe('Release checklist');

  // And back the other way, by double-clicking the title.
  await b.locator('h2.session-title').dblclick();
  await expect(b.getByLabel('Session title')).toHaveValue('Release checklist');
  await b.getByLabel('Session title').fill('Release checklist, v2');
  await b.getByLabel('Session title').press('Enter');
  await expect(a.locator('h2.session-title')).toHaveText('Release checklist, v2');
  await expect(a.getByRole('navigation', { name: 'Sessions' }).getByRole('link')).toContainText('Release checklist, v2');

  await a.getByLabel('Model').fill('openai/other-model');
  await a.getByLabel('Reasoning effort').selectOption('high');
  await a.getByRole('button', { name: 'Switch' }).click();
  await expect(b.getByLabel('Model')).toHaveValue('openai/other-model');
  await expect(b.getByLabel('Reasoning effort')).toHaveValue('high');
  await expect(b.locator('.notice')).toContainText('Model changed to openai/other-model (high), was openai/fake');
  await expect(b.getByRole('button', { name: 'Switch' })).toHaveCount(0);
  await expect(a.getByRole('button', { name: 'Switch' })).toHaveCount(0);

  expect(problemsA).toEqual([]);
  expect(problemsB).toEqual([]);
  await ctxB.close();
});
