import { test, expect, watch } from './harness';

// Contract section 12: a member may narrow a session's sandbox but not widen
// it. The app offers a member only the narrower choices; what it saves is
// what the server then runs commands under.
test("a member narrows the session's sandbox in its settings; the wider choices are an owner's", async ({ env, page }) => {
  const ws = await env.tandem.must('POST', '/v1/workspaces', { path: env.workDir });
  const detach = await env.tandem.attach(ws.id); // the workspace stays open while the member comes
  const sess = await env.tandem.must('POST', `/v1/workspaces/${ws.id}/sessions`, { title: 'boxed' });
  expect(sess.sandbox).toBe('workspace');
  const member = await env.tandem.must('POST', '/v1/tokens', { name: 'mia', role: 'member' });

  const problems = watch(page);
  await page.goto(`${env.tandem.url}/#token=${member.secret}&/w/${ws.id}/s/${sess.id}`);
  await expect(page.getByTestId('conn')).toHaveAttribute('data-state', 'live');
  await expect(page.getByTestId('sandbox-badge')).toHaveText('sandbox: workspace');

  await page.getByRole('button', { name: 'Session actions' }).click();
  await page.getByRole('menuitem', { name: 'Sandbox settings…' }).click();
  const form = page.getByRole('form', { name: 'Sandbox settings' });
  await expect(form.locator('input[value="off"]')).toBeDisabled();
  await expect(form.locator('input[name="sandbox-network"]')).toBeDisabled();
  await form.locator('input[value="read-only"]').check();
  await form.getByRole('button', { name: 'Save' }).click();
  await expect(form).toHaveCount(0);
  await expect(page.getByTestId('sandbox-badge')).toHaveText('sandbox: read-only');
  expect((await env.tandem.must('GET', `/v1/workspaces/${ws.id}/sessions/${sess.id}`)).sandbox).toBe('read-only');

  // What the app does not offer, the server refuses too.
  const widen = await fetch(`${env.tandem.url}/v1/workspaces/${ws.id}/sessions/${sess.id}`, {
    method: 'PATCH',
    headers: { Authorization: `Bearer ${member.secret}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ sandbox: 'workspace' }),
  });
  expect(widen.status).toBe(403);

  // The owner widens: the member's page follows.
  await env.tandem.must('PATCH', `/v1/workspaces/${ws.id}/sessions/${sess.id}`, { sandbox: 'off' });
  await expect(page.getByTestId('sandbox-badge')).toHaveText('unconfined');
  expect(problems).toEqual([]);
  detach();
});
