#!/usr/bin/env bash
# Runs the GitHub Copilot SDK's own Go e2e tests (multi_client, session,
# pending_work_resume; vendored here, see UPSTREAM.md) against a server that
# speaks the Copilot CLI's SDK protocol.
#
#   e2e/copilotsdk/run.sh CLI_PATH [TEST_REGEX]
#
# CLI_PATH   what the SDK starts as "the CLI" (executed directly; it gets
#            --headless --no-auto-update ... --stdio | --port N).
# TEST_REGEX passed to `go test -run`; with one, tests-go.txt is not applied.
#
# stdout: one "PASS|FAIL|SKIP file: test" line per test, "# ..." notes, and
# last "N passed, M failed". Exit 0 only when M is 0 and N > 0.
# stderr: progress (install steps, the log's path).
#
# Env: COPILOTSDK_CACHE (default ~/.cache/tandem-copilotsdk): the work copy,
#      the replay proxy's node_modules, logs. COPILOTSDK_TIMEOUT (default
#      1500 s): the test run. COPILOTSDK_INSTALL_TIMEOUT (default 600 s): each
#      install step. COPILOTSDK_NICE (default 19).
# Snapshots are read-only: GITHUB_ACTIONS=true makes a snapshot miss an error
# and stops the replay proxy from forwarding to the internet or rewriting files.
set -uo pipefail

usage() { echo "usage: $0 CLI_PATH [TEST_REGEX]" >&2; exit 2; }
[ $# -ge 1 ] && [ $# -le 2 ] || usage
CLI_ARG=$1
REGEX=${2:-}

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${COPILOTSDK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tandem-copilotsdk}
TIMEOUT=${COPILOTSDK_TIMEOUT:-1500}
INSTALL_TIMEOUT=${COPILOTSDK_INSTALL_TIMEOUT:-600}
NICE=(nice -n "${COPILOTSDK_NICE:-19}")

say() { echo "[copilotsdk] $*" >&2; }
die_setup() { # a setup failure still ends with the closing line
    echo "FAIL (setup): $*"
    echo "0 passed, 1 failed"
    exit 1
}

for tool in go node npm timeout flock sha256sum; do
    command -v "$tool" >/dev/null || die_setup "$tool not found on PATH"
done

case "$CLI_ARG" in /*) CLI=$CLI_ARG ;; *) CLI=$PWD/$CLI_ARG ;; esac
[ -x "$CLI" ] || die_setup "CLI_PATH $CLI is not an executable"

mkdir -p "$CACHE/logs" || die_setup "cannot create $CACHE"
# One run per cache at a time (the work copy and node_modules are shared).
exec 9>"$CACHE/.lock"
flock -w 900 9 || die_setup "another run holds $CACHE/.lock for over 900 s"

# --- work copy: the suite, plus node_modules kept from earlier runs ----------
# The tests run from a copy so that nothing (node_modules, go test's files)
# is ever written into the checkout.
WORK=$CACHE/work
KEEP=$CACHE/keep
mkdir -p "$KEEP"
if [ -d "$WORK/test/harness/node_modules" ]; then
    rm -rf "${KEEP:?}/test_harness"
    mv "$WORK/test/harness/node_modules" "$KEEP/test_harness"
fi
rm -rf "${WORK:?}"
mkdir -p "$WORK"
cp -a "$HERE/go" "$HERE/test" "$WORK/" || die_setup "cannot copy the suite to $WORK"
[ -d "$KEEP/test_harness" ] && mv "$KEEP/test_harness" "$WORK/test/harness/node_modules"

harness=$WORK/test/harness
stamp=$harness/node_modules/.kit-lock-sha256
hash=$(sha256sum "$harness/package-lock.json" | cut -d' ' -f1)
if ! [ -f "$stamp" ] || [ "$(cat "$stamp")" != "$hash" ]; then
    say "npm ci in test/harness (the replay proxy; bounded by ${INSTALL_TIMEOUT}s)"
    (cd "$harness" && timeout -k 10 "$INSTALL_TIMEOUT" "${NICE[@]}" npm ci --no-audit --no-fund --loglevel=error >&2) ||
        die_setup "npm ci failed in test/harness"
    echo "$hash" >"$stamp"
fi
say "go mod download (bounded by ${INSTALL_TIMEOUT}s)"
(cd "$WORK/go" && timeout -k 10 "$INSTALL_TIMEOUT" "${NICE[@]}" go mod download >&2) ||
    die_setup "go mod download failed"

# --- run ---------------------------------------------------------------------
LOG=$CACHE/logs/go-$(date +%Y%m%d-%H%M%S).log
say "running the SDK's Go e2e tests against $CLI (bounded by ${TIMEOUT}s); log: $LOG"

# The harness sets every variable the CLI needs; drop ambient ones that would
# change the transport or the auth the snapshots were recorded with.
unset COPILOT_SDK_DEFAULT_CONNECTION COPILOT_HMAC_KEY CAPI_HMAC_KEY COPILOT_SDK_AUTH_TOKEN
export COPILOT_CLI_PATH=$CLI GITHUB_ACTIONS=true CI=true NO_COLOR=1 FORCE_COLOR=0
export GOCACHE="${GOCACHE:-$(go env GOCACHE)}"
# The harness isolates COPILOT_HOME and XDG_CONFIG/STATE_HOME but not the
# cache: keep what a CLI caches there in our cache, not the user's.
export XDG_CACHE_HOME=$CACHE/xdg-cache
mkdir -p "$XDG_CACHE_HOME"
rm -f "$XDG_CACHE_HOME"/copilot/copilot-user-cache.json*

START=$(date +%s)
RUNARGS=()
[ -n "$REGEX" ] && RUNARGS=(-run "$REGEX")
# go test's own -timeout fires first so it names the hung test.
(cd "$WORK/go" && exec timeout -k 30 "$TIMEOUT" "${NICE[@]}" \
    go test -count=1 -v -timeout "$((TIMEOUT > 60 ? TIMEOUT - 30 : TIMEOUT))s" ./internal/e2e "${RUNARGS[@]}") \
    >"$LOG" 2>&1 &
RUNPID=$!
wait "$RUNPID"
RC=$?
# `timeout` made itself a process-group leader; end whatever the tests left
# running in that group (CLI children, replay proxies).
kill -TERM -- "-$RUNPID" 2>/dev/null && sleep 2 && kill -KILL -- "-$RUNPID" 2>/dev/null
END=$(date +%s)
say "finished in $((END - START))s, runner exit status $RC"
{ [ "$RC" = 124 ] || [ "$RC" = 137 ]; } && say "the run hit the ${TIMEOUT}s timeout"

MANIFEST=-
[ -z "$REGEX" ] && MANIFEST=$HERE/tests-go.txt
node "$HERE/report.mjs" go "$LOG" "$WORK/go" "$MANIFEST" "$RC"
