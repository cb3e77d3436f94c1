#!/usr/bin/env bash
# Refreshes this vendored copy of the GitHub Copilot SDK's Go e2e suite from
# upstream (github.com/github/copilot-sdk), keeping only what the Go flavour
# of the three test files needs.
#
#   e2e/copilotsdk/refresh.sh [COMMIT|TAG] [SRC_DIR]
#
# Without SRC_DIR it clones upstream into a temporary directory (needs git
# and network access to GitHub); with one, it uses that checkout as is. Needs
# node and npm (the npm registry) to re-resolve the replay proxy's trimmed
# package-lock.json. Afterwards: run scripts/copilot-sdk against the real CLI
# (see UPSTREAM.md) and regenerate tests-go.txt from its PASS/FAIL lines.
set -euo pipefail
REF=${1:-main}
SRC=${2:-}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
FILES=(multi_client session pending_work_resume)

if [ -z "$SRC" ]; then
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    git clone --quiet https://github.com/github/copilot-sdk "$tmp/src"
    git -C "$tmp/src" checkout --quiet "$REF"
    SRC=$tmp/src
fi
SRC=$(cd "$SRC" && pwd)
COMMIT=$(git -C "$SRC" rev-parse HEAD 2>/dev/null || echo "$REF")

rm -rf "${HERE:?}/go" "${HERE:?}/test"
cp "$SRC/LICENSE" "$SRC/sdk-protocol-version.json" "$HERE/"

# go/: the module's non-test sources (no samples, no cmd/) and, of
# internal/e2e, the harness plus the three test files (they compile alone).
(cd "$SRC/go" && find . -type f \( -name '*.go' -o -name go.mod -o -name go.sum \) \
    ! -path './samples/*' ! -path './cmd/*' ! -path './internal/e2e/*' ! -name '*_test.go' -print) |
    while read -r f; do mkdir -p "$HERE/go/$(dirname "$f")"; cp "$SRC/go/$f" "$HERE/go/$f"; done
mkdir -p "$HERE/go/internal/e2e"
cp -r "$SRC/go/internal/e2e/testharness" "$HERE/go/internal/e2e/"
for f in "${FILES[@]}"; do cp "$SRC/go/internal/e2e/${f}_e2e_test.go" "$HERE/go/internal/e2e/"; done

# test/harness: the replaying proxy's runtime files (no *.test.ts, no MCP
# test servers), and the three files' snapshots.
mkdir -p "$HERE/test/harness" "$HERE/test/snapshots"
for f in server replayingCapiProxy capturingHttpProxy connectProxy certUtils mockHandlers \
    anthropicMessagesAdapter modelProtocolAdapterShared responsesApiAdapter util; do
    cp "$SRC/test/harness/$f.ts" "$HERE/test/harness/"
done
cp "$SRC/test/harness/tsconfig.json" "$HERE/test/harness/"
for f in "${FILES[@]}"; do cp -r "$SRC/test/snapshots/$f" "$HERE/test/snapshots/"; done

# The proxy's manifest trimmed to its runtime needs, at the upstream lock's
# versions (upstream's also pins dev tools this suite does not use).
HL=$SRC/test/harness/package-lock.json
ver() { node -e "console.log(require('$HL').packages['node_modules/$1'].version)"; }
cat >"$HERE/test/harness/package.json" <<JSON
{
  "name": "harness",
  "version": "1.0.0",
  "description": "Test infrastructure for this repo. Not to be published. (Trimmed by Tandem's copilotsdk kit: only the replay proxy's runtime deps.)",
  "license": "ISC",
  "private": true,
  "type": "module",
  "main": "server.ts",
  "engines": {
    "node": "^20.19.0 || >=22.12.0"
  },
  "devDependencies": {
    "node-forge": "$(ver node-forge)",
    "openai": "$(ver openai)",
    "tsx": "$(ver tsx)",
    "yaml": "$(ver yaml)"
  }
}
JSON
cp "$HL" "$HERE/test/harness/package-lock.json"
(cd "$HERE/test/harness" && npm install --package-lock-only --ignore-scripts --no-audit --no-fund >/dev/null)

sed -i -E "s/^- Commit: .*/- Commit: \`$COMMIT\`/" "$HERE/UPSTREAM.md"
echo "refreshed from $COMMIT: $(find "$HERE/go" "$HERE/test" -type f | wc -l) files, $(du -sh "$HERE" | cut -f1)"
