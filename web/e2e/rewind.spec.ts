import { readFileSync, writeFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { test, expect, twoPagesOnANewSession } from './harness';

// A run writes a file; one person rewinds to before its prompt: the app
// shows what the rewind will undo and asks to confirm; the file is back as
// it was, the prompt leaves both pages' conversation.
test('rewind a prompt: diff shown, confirmed, files back, the other page updated', async ({ env, page }) => {
  writeFileSync(join(env.workDir, 'notes.txt'), 'before\n');
  const { b, ctxB, wid, sid, problemsA, problemsB } = await twoPagesOnANewSession(page, env.tandem.url, env.workDir);
  const a = page;
  // Nobody is asked: the test is about the rewind.
  const patched = await env.tandem.api('PATCH', `/v1/workspaces/${wid}/sessions/${sid}`, { permission_mode: 'allow_all' });
  expect(patched.status).toBe(200);

  env.fake.script = (_n, body) => {
    const last = body.messages.at(-1);
    if (last.role === 'tool') return { text: ['Done.'] };
    if (String(last.content).includes('first')) return { text: ['Nothing to change.'] };
    return {
      text: ['Writing.'],
      toolCalls: [
        { id: 'call_1', name: 'write', args: { path: 'notes.txt', content: 'after\n' } },
        { id: 'call_2', name: 'write', args: { path: 'new/made.txt', content: 'made\n' } },
      ],
    };
  };
  const prompt = a.getByRole('textbox', { name: 'Prompt', exact: true });
  await prompt.fill('first, just talk');
  await prompt.press('Enter');
  await expect(a.getByTestId('msg-assistant').last()).toContainText('Nothing to change.');
  await prompt.fill('rewrite the notes');
  await prompt.press('Enter');
  await expect(a.getByTestId('msg-assistant').last()).toContainText('Done.');
  expect(readFileSync(join(env.workDir, 'notes.txt'), 'utf8')).toBe('after\n');
  await expect(b.getByTestId('msg-user')).toHaveCount(2);

  // Only the prompt whose run changed files can be rewound.
  const users = a.getByTestId('msg-user');
  await expect(users.nth(1).getByTestId('rewind')).toBeVisible();
  await expect(users.nth(0).getByTestId('rewind')).toHaveCount(0);
  await users.nth(1).getByTestId('rewind').click();
  const panel = a.getByTestId('rewind-panel');
  await expect(panel).toContainText('notes.txt');
  await expect(panel).toContainText('new/made.txt');
  await expect(panel.getByTestId('rewind-diff')).toContainText('-before');
  await expect(panel.getByTestId('rewind-diff')).toContainText('+after');
  // Nothing happens before the confirmation.
  expect(readFileSync(join(env.workDir, 'notes.txt'), 'utf8')).toBe('after\n');
  await panel.getByRole('button', { name: 'Confirm rewind' }).click();
  await expect(panel).toHaveCount(0);

  await expect(a.getByTestId('msg-user')).toHaveCount(1);
  await expect(b.getByTestId('msg-user')).toHaveCount(1);
  await expect(b.getByTestId('msg-user')).toContainText('first, just talk');
  expect(readFileSync(join(env.workDir, 'notes.txt'), 'utf8')).toBe('before\n');
  expect(existsSync(join(env.workDir, 'new'))).toBe(false);

  expect(problemsA).toEqual([]);
  expect(problemsB).toEqual([]);
  await ctxB.close();
});

// A fork from a prompt opens a new session holding the history up to it.
test('fork from a message', async ({ env, page }) => {
  const { ctxB, problemsA } = await twoPagesOnANewSession(page, env.tandem.url, env.workDir);
  env.fake.script = () => ({ text: ['Answered.'] });
  const prompt = page.getByRole('textbox', { name: 'Prompt', exact: true });
  await prompt.fill('one');
  await prompt.press('Enter');
  await expect(page.getByTestId('msg-assistant')).toHaveCount(1);
  await expect(page.getByTestId('msg-assistant').last()).toContainText('Answered.');
  await prompt.fill('two');
  await prompt.press('Enter');
  await expect(page.getByTestId('msg-assistant')).toHaveCount(2);
  const before = page.url();
  await page.getByTestId('msg-user').first().getByRole('button', { name: 'Fork from here' }).click();
  await expect(page).not.toHaveURL(before);
  await expect(page.getByTestId('msg-user')).toHaveCount(1);
  await expect(page.getByTestId('msg-user')).toContainText('one');
  expect(problemsA).toEqual([]);
  await ctxB.close();
});

// Export downloads the session as a document; Import makes a new session
// of it, with the same conversation.
test('export and import a session from the session menu', async ({ env, page }) => {
  const { ctxB, problemsA } = await twoPagesOnANewSession(page, env.tandem.url, env.workDir);
  env.fake.script = () => ({ text: ['Exported answer.'] });
  const prompt = page.getByRole('textbox', { name: 'Prompt', exact: true });
  await prompt.fill('carry me over');
  await prompt.press('Enter');
  await expect(page.getByTestId('msg-assistant').last()).toContainText('Exported answer.');

  await page.getByRole('button', { name: 'Session actions' }).click();
  const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('menuitem', { name: 'Export' }).click()]);
  const file = join(env.workDir, '..', 'export.json');
  await download.saveAs(file);
  const doc = JSON.parse(readFileSync(file, 'utf8'));
  expect(doc.format).toBe('tandem.session.v1');
  expect(doc.messages).toHaveLength(2);

  const before = page.url();
  await page.getByTestId('import-file').setInputFiles(file);
  await expect(page).not.toHaveURL(before);
  await expect(page.getByTestId('msg-user')).toContainText('carry me over');
  await expect(page.getByTestId('msg-assistant')).toContainText('Exported answer.');
  expect(problemsA).toEqual([]);
  await ctxB.close();
});
