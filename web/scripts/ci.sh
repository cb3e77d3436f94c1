#!/usr/bin/env bash
# CI for the web app: install its dependencies exactly as locked, type-check,
# build, run the unit tests and the end-to-end tests (Chromium against the
# real tandem binary, which needs Go). Fails, never skips, when something is
# missing. Debian packages it needs: nodejs (20.19 or later) with npm, golang,
# chromium; it installs chromium itself when it runs as root (or with sudo).
set -euo pipefail
cd "$(dirname "$0")/.."

command -v node >/dev/null || { echo "web ci: Node.js 20.19+ is required" >&2; exit 1; }
command -v npm >/dev/null || { echo "web ci: npm is required" >&2; exit 1; }
command -v go >/dev/null || { echo "web ci: Go is required (the e2e tests build tandem)" >&2; exit 1; }
node -e 'const [a,b]=process.versions.node.split(".").map(Number); if (a<20||(a===20&&b<19)) { console.error("web ci: Node "+process.versions.node+" is too old: Vite needs 20.19+"); process.exit(1) }'

chromium="${CHROMIUM_PATH:-/usr/bin/chromium}"
if [ ! -x "$chromium" ] && [ -z "${CHROMIUM_PATH:-}" ] && command -v apt-get >/dev/null; then
  echo "web ci: installing chromium"
  sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq && $sudo apt-get install -y -qq chromium
fi
[ -x "$chromium" ] || { echo "web ci: Chromium not found at $chromium (Debian: apt-get install chromium, or set CHROMIUM_PATH)" >&2; exit 1; }

npm ci --no-audit --no-fund
npm run check
npm run build
npm test
npx playwright test
