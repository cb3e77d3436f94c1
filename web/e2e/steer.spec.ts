import type { Page } from '@playwright/test';
import { test, expect, gate, clientIdOf, shot, twoPagesOnANewSession } from './harness';

const prompt = (p: Page) => p.getByRole('textbox', { name: 'Prompt', exact: true });

// Two pages on one session: A prompts a run of two steps (a tool call, then
// an answer); while its first step is with the model, B steers a prompt in.
// The steered prompt joins A's run (no run of its own), enters its history
// before the next step, and that step answers it. Both pages show it once,
// in the same run, marked steered and named after B, and the answer once.
test('a prompt steered from another page joins the running answer', async ({ env, page }) => {
  const a = page;
  const { b, ctxB, wid, sid, problemsA, problemsB } = await twoPagesOnANewSession(a, env.tandem.url, env.workDir);
  await expect(prompt(b)).toBeVisible();
  const idB = await clientIdOf(b);

  const [held, release] = gate();
  env.fake.script = (n, body) => {
    if (n === 0) {
      // The first step lists the files, and waits before it ends.
      return { text: ['Looking at the files.'], toolCalls: [{ id: 'call_ls', name: 'ls', args: {} }], holdAfter: 1, gate: held };
    }
    const last = body.messages.at(-1);
    const said = typeof last.content === 'string' ? last.content : JSON.stringify(last.content);
    if (last.role === 'user' && said.includes('Also look at the docs')) return { text: ['The docs are ', 'in docs/, as you asked.'] };
    return { text: ['Nothing more.'] };
  };

  await prompt(a).fill('List the files');
  await prompt(a).press('Enter');
  await expect(b.locator('[data-testid="msg-assistant"][aria-busy="true"]')).toContainText('Looking at the files.');
  await env.fake.requested(1);

  // B steers: the box appears while the agent works, and the button says so.
  await b.getByRole('checkbox', { name: 'Steer' }).check();
  await expect(b.getByTestId('send')).toHaveText('Steer');
  await prompt(b).fill('Also look at the docs');
  await prompt(b).press('Enter');
  await expect(prompt(b)).toHaveValue('');
  // Both see it waiting for the run's next step, and no second run queued.
  await expect(a.getByTestId('pending-steers')).toContainText(`client ${idB.slice(0, 4)} steered (joins at the next step): Also look at the docs`);
  await expect(b.getByTestId('pending-steers')).toContainText('you steered (joins at the next step): Also look at the docs');
  await expect(a.getByTestId('queue')).not.toContainText('queued');
  expect(env.fake.requests).toHaveLength(1);
  await shot(a, 'steer-waiting-desktop');

  release();
  for (const [p, sender] of [
    [a, `client ${idB.slice(0, 4)}`],
    [b, 'you'],
  ] as const) {
    await expect(p.getByTestId('msg-assistant').last()).toContainText('The docs are in docs/, as you asked.');
    await expect(p.locator('[data-testid="msg-assistant"][aria-busy="true"]')).toHaveCount(0);
    await expect(p.getByTestId('cancel')).toHaveCount(0);
    await expect(p.getByTestId('pending-steers')).toHaveCount(0);
    // Once each: the prompt, the steered prompt, the answer to it.
    const users = p.getByTestId('msg-user');
    await expect(users).toHaveCount(2);
    await expect(users.nth(0)).toContainText('List the files');
    const steered = users.nth(1);
    await expect(steered).toContainText('Also look at the docs');
    await expect(steered).toHaveAttribute('data-steered', 'true');
    await expect(steered.locator('.msg-head')).toContainText(`${sender} steered`);
    await expect(p.getByText('The docs are in docs/, as you asked.')).toHaveCount(1);
    // In one run: every message of the page carries the first prompt's run_id.
    const runs = await p.locator('[data-testid^="msg-"][data-run-id]').evaluateAll((els) => [...new Set(els.map((e) => e.getAttribute('data-run-id')))]);
    expect(runs).toHaveLength(1);
  }
  await expect(a.getByTestId('msg-user').first()).toContainText('you');
  await shot(a, 'steer-joined-desktop');
  await b.setViewportSize({ width: 360, height: 740 });
  await expect(b.getByRole('navigation', { name: 'Sessions' })).toBeHidden(); // a drawer at this width
  expect(await b.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(360);
  await shot(b, 'steer-joined-360');

  // The server agrees: one run, with both prompts, completed once, and the
  // model read the steered prompt after the tool's result.
  const { messages } = await env.tandem.must('GET', `/v1/workspaces/${wid}/sessions/${sid}/messages`);
  expect(new Set(messages.map((m: any) => m.run_id)).size).toBe(1);
  expect(messages.filter((m: any) => m.role === 'user').map((m: any) => [m.parts[0].text, m.client_id])).toEqual([
    ['List the files', await clientIdOf(a)],
    ['Also look at the docs', idB],
  ]);
  const { events } = await env.tandem.must('GET', `/v1/workspaces/${wid}/sessions/${sid}/events?after=0&limit=1000`);
  expect(events.filter((e: any) => e.type === 'run.completed')).toHaveLength(1);
  expect(env.fake.requests).toHaveLength(2);
  expect(env.fake.requests[1].messages.slice(-2).map((m: any) => m.role)).toEqual(['tool', 'user']);

  // A reload rebuilds the same from the history.
  await b.reload();
  await expect(b.getByTestId('msg-user').nth(1)).toHaveAttribute('data-steered', 'true');
  await expect(b.getByTestId('msg-user').nth(1).locator('.msg-head')).toContainText('you steered');
  await expect(b.getByText('The docs are in docs/, as you asked.')).toHaveCount(1);

  expect(problemsA).toEqual([]);
  expect(problemsB).toEqual([]);
  await ctxB.close();
});
