import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Page } from '@playwright/test';
import { test, expect, watch, openWorkspace, TOKEN } from './harness';

const prompt = (p: Page) => p.getByRole('textbox', { name: 'Prompt', exact: true });

// Each payload would set window.__pwned (or open a dialog) if it ran.
const PAYLOADS = [
  '<script>window.__pwned = "script"</script>',
  '<img src="x" onerror="window.__pwned = \'img\'">',
  '<svg onload="alert(\'svg\')"><circle r="1"/></svg>',
  '<iframe srcdoc="<script>parent.__pwned=\'iframe\'</script>"></iframe>',
  '[click me](javascript:window.__pwned="link")',
  '<a href="javascript:window.__pwned=\'a\'">a link</a>',
  '<details open ontoggle="window.__pwned=\'details\'">x</details>',
];

for (const csp of [true, false]) {
  // Without the CSP (bypassCSP) the sanitizer alone must hold.
  test(`script in a model answer or a tool output does not run (${csp ? 'with' : 'without'} the CSP)`, async ({ env, browser }) => {
  const ctx = await browser.newContext({ bypassCSP: !csp });
  const page = await ctx.newPage();
  const problems = watch(page);
  writeFileSync(join(env.workDir, 'evil.html'), PAYLOADS.join('\n') + '\n');
  env.fake.script = (_n, body) => {
    if (body.messages.at(-1).role === 'tool') return { text: ['Here it is again:\n\n', ...PAYLOADS.map((p) => p + '\n\n')] };
    return {
      reasoning: ['<img src=x onerror="window.__pwned=\'reasoning\'">'],
      text: ['Reading the file. ', ...PAYLOADS],
      toolCalls: [{ id: 'call_v1', name: 'view', args: { path: 'evil.html' } }],
    };
  };
  await openWorkspace(page, env.tandem.url, env.workDir);
  await page.getByRole('button', { name: '+ New session' }).first().click();
  await prompt(page).fill('<img src=x onerror="window.__pwned=\'prompt\'"> show me evil.html');
  await prompt(page).press('Enter');
  await expect(page.getByTestId('msg-assistant').last()).toContainText('Here it is again');
  await expect(page.getByTestId('msg-assistant').last()).toHaveAttribute('aria-busy', 'false');

  // Open every folded part: the tool output and the reasoning render too.
  const card = page.locator('[data-testid="tool-card"][data-tool="view"]');
  await card.locator('.tool-head').click();
  await expect(card.locator('.output')).toContainText('onerror="window.__pwned');
  await page.locator('.reasoning summary').first().click();
  await expect(page.locator('.reasoning-text').first()).toContainText('onerror');
  // Links made safe: clicking one does nothing.
  await page.getByText('click me').first().click();
  await page.getByText('a link').first().click();
  await page.waitForTimeout(300);

  expect(await page.evaluate(() => (window as any).__pwned)).toBeUndefined();
  expect(await page.locator('[onerror], [onload], [ontoggle], iframe, script:not([src])').count()).toBe(0);
  expect(problems).toEqual([]);
  // The prompt itself showed as text.
  await expect(page.getByTestId('msg-user')).toContainText('<img src=x onerror=');
  await ctx.close();
  });
}

test('a wrong token shows a clear message, and a right one gets in', async ({ env, page }) => {
  await page.goto(`${env.tandem.url}/#token=not-the-token`);
  await expect(page.getByTestId('auth-error')).toContainText('The server refused this token (401 unauthorized)');
  expect(page.url()).not.toContain('not-the-token');
  await page.getByLabel('Token').fill(TOKEN);
  await page.getByRole('button', { name: 'Connect' }).click();
  await expect(page.getByLabel('Workspace path')).toBeVisible();

  // No token at all: the app asks for one.
  const fresh = await page.context().browser()!.newContext();
  const p2 = await fresh.newPage();
  await p2.goto(env.tandem.url + '/');
  await expect(p2.getByText('This server needs its token')).toBeVisible();
  await fresh.close();
});

test('pages carry a strict CSP; assets are immutable', async ({ env, page }) => {
  const problems = watch(page);
  const resp = await page.goto(`${env.tandem.url}/#token=${TOKEN}`);
  const h = resp!.headers();
  expect(h['content-security-policy']).toBe(
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'",
  );
  expect(h['x-content-type-options']).toBe('nosniff');
  const html = await resp!.text();
  expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/); // no inline script
  expect(html).not.toMatch(/\sstyle=/);
  const asset = /src="(\/assets\/[^"]+\.js)"/.exec(html)![1];
  const a = await page.request.get(env.tandem.url + asset);
  expect(a.headers()['cache-control']).toBe('public, max-age=31536000, immutable');
  await expect(page.getByLabel('Workspace path')).toBeVisible();
  expect(problems).toEqual([]);
});

test('a one-time sign-in code from tandem web signs the page in, once, and leaves the URL', async ({ env, page }) => {
  const issue = async () => {
    const r = await page.request.post(`${env.tandem.url}/v1/signin-codes`, { headers: { Authorization: `Bearer ${TOKEN}` }, data: {} });
    expect(r.status()).toBe(201);
    return ((await r.json()) as { code: string }).code;
  };
  const code = await issue();
  await page.goto(`${env.tandem.url}/#code=${code}`);
  await expect(page.getByLabel('Workspace path')).toBeVisible();
  expect(page.url()).not.toContain(code);
  expect(await page.evaluate(() => sessionStorage.getItem('tandem.token'))).toBe(TOKEN);

  // The same link in a fresh tab does not sign in again: the code worked once.
  const fresh = await page.context().browser()!.newContext();
  const p2 = await fresh.newPage();
  await p2.goto(`${env.tandem.url}/#code=${code}`);
  await expect(p2.getByText('already used or has expired')).toBeVisible();
  await expect(p2.getByText('This server needs its token')).toBeVisible();
  expect(p2.url()).not.toContain(code);
  await fresh.close();
});
