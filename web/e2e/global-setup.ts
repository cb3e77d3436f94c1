import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromiumPath } from './browser';

// Builds the tandem binary once, with the app embedded: the tests run what a
// user runs.
export default function globalSetup() {
  chromiumPath();
  const web = fileURLToPath(new URL('..', import.meta.url));
  if (!existsSync(join(web, 'dist/app/index.html'))) {
    throw new Error('the app is not built: run `npm run build` first (`npm run e2e` does)');
  }
  const dir = mkdtempSync(join(tmpdir(), 'tandem-e2e-bin-'));
  const bin = join(dir, 'tandem');
  execFileSync('go', ['build', '-o', bin, './cmd/tandem'], { cwd: resolve(web, '..'), stdio: 'inherit' });
  process.env.TANDEM_E2E_BIN = bin;
}
