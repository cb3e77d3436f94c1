import type { Page } from '@playwright/test';
import { test, expect, gate, watch, openWorkspace } from './harness';

const prompt = (p: Page) => p.getByRole('textbox', { name: 'Prompt', exact: true });

// A 1x1 PNG.
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==', 'base64');

test('attachments from the picker and by drag and drop reach the model', async ({ env, page }) => {
  const problems = watch(page);
  env.fake.script = () => ({ text: ['Got them.'] });
  await openWorkspace(page, env.tandem.url, env.workDir);
  await page.getByRole('button', { name: '+ New session' }).first().click();

  const chooser = page.waitForEvent('filechooser');
  await page.getByRole('button', { name: 'Attach' }).click();
  await (await chooser).setFiles([
    { name: 'dot.png', mimeType: 'image/png', buffer: PNG },
    { name: 'notes.txt', mimeType: 'text/plain', buffer: Buffer.from('remember the milk\n') },
  ]);
  // Dropped on the composer, as from a file manager.
  await page.evaluate(() => {
    const dt = new DataTransfer();
    dt.items.add(new File(['dropped text\n'], 'dropped.txt', { type: 'text/plain' }));
    const form = document.querySelector('form.composer')!;
    form.dispatchEvent(new DragEvent('dragover', { dataTransfer: dt, bubbles: true, cancelable: true }));
    form.dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
  });
  const chips = page.getByRole('list', { name: 'Attachments' }).getByRole('listitem');
  await expect(chips).toHaveCount(3);
  await expect(chips.first().locator('img.thumb')).toBeVisible(); // image preview
  await prompt(page).fill('Look at these');
  await prompt(page).press('Enter');
  await expect(page.getByTestId('msg-assistant').last()).toContainText('Got them.');
  const user = page.getByTestId('msg-user').last();
  await expect(user.locator('.attachment')).toHaveCount(3);
  await expect(user).toContainText('dot.png');
  await expect(user).toContainText('dropped.txt');
  await expect(chips).toHaveCount(0);

  const sent = JSON.stringify(env.fake.requests.at(-1).messages);
  expect(sent).toContain('remember the milk');
  expect(sent).toContain('dropped text');
  expect(sent).toContain(PNG.toString('base64'));
  expect(problems).toEqual([]);
});

test('prompts sent while the agent works queue, in order, and run', async ({ env, page }) => {
  const [held, release] = gate();
  env.fake.script = (n, body) => {
    const last = JSON.stringify(body.messages.at(-1).content);
    if (n === 0) return { text: ['First ', 'answer.'], holdAfter: 1, gate: held };
    return { text: [`Answer to ${/second|third/.exec(last)?.[0]}.`] };
  };
  await openWorkspace(page, env.tandem.url, env.workDir);
  await page.getByRole('button', { name: '+ New session' }).first().click();
  await prompt(page).fill('first');
  await prompt(page).press('Enter');
  await expect(page.locator('[data-testid="msg-assistant"][aria-busy="true"]')).toContainText('First');
  await expect(page.getByTestId('send')).toHaveText('Queue');
  for (const p of ['second', 'third']) {
    await prompt(page).fill(p);
    await prompt(page).press('Enter');
  }
  const q = page.getByTestId('queue');
  await expect(q).toContainText('2 queued');
  await q.locator('summary').click();
  await expect(q.locator('li')).toHaveText(['you: second', 'you: third']);
  release();
  await expect(page.getByTestId('msg-assistant').last()).toContainText('Answer to third.');
  await expect(page.getByTestId('queue')).toHaveCount(0);
  await expect(page.getByTestId('msg-assistant')).toHaveText([/First answer\./, /Answer to second\./, /Answer to third\./]);
});
