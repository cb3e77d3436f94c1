import { existsSync } from 'node:fs';

/** The flags this environment needs: without the background-networking ones Chromium tries the network and stalls. */
export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** chromiumPath is the system Chromium; the tests fail (never skip) without it. */
export function chromiumPath(): string {
  const p = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
  if (!existsSync(p)) {
    throw new Error(`Chromium not found at ${p}: install it (Debian: apt-get install -y chromium) or set CHROMIUM_PATH`);
  }
  return p;
}
