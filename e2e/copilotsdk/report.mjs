// Turns one run of the Copilot SDK e2e tests into one line per test and a
// closing "N passed, M failed" line. Used by run.sh; no dependencies.
//
//   node report.mjs go   GO_TEST_V_LOG  GO_DIR      MANIFEST|- RC
//   node report.mjs node VITEST_JSON    VITEST_LOG  MANIFEST|- RC
//
// MANIFEST (tests-<flavour>.txt, "file<TAB>test name" per line) lists every
// test the flavour has; when given (a run without TEST_REGEX) a listed test that
// never reported is counted as FAIL "(not run)", so a crash, a hang or a setup
// failure cannot shrink the denominator. Skipped tests are printed but counted
// in neither N nor M.
import fs from "node:fs";
import path from "node:path";

const [flavour, primary, secondary, manifestPath, rcArg] = process.argv.slice(2);
const rc = Number(rcArg ?? 0);
const results = new Map(); // key "file\tname" -> {status, note}
const notes = [];

function put(file, name, status, note = "") {
    const key = `${file}\t${name}`;
    const prev = results.get(key);
    // A test that reported FAIL once stays failed (e.g. go test -count>1).
    if (prev && prev.status === "FAIL") return;
    results.set(key, { status, note });
}

function readIf(p) {
    try {
        return fs.readFileSync(p, "utf8");
    } catch {
        return null;
    }
}

if (flavour === "go") {
    const log = readIf(primary) ?? "";
    // Map top-level Test functions to the file (snapshot folder) that holds them.
    const fileOf = new Map();
    const e2eDir = path.join(secondary, "internal", "e2e");
    for (const f of fs.readdirSync(e2eDir)) {
        if (!f.endsWith("_e2e_test.go")) continue;
        const src = fs.readFileSync(path.join(e2eDir, f), "utf8");
        for (const m of src.matchAll(/^func (Test\w+)\(t \*testing\.T\)/gm)) {
            fileOf.set(m[1], f.replace(/_e2e_test\.go$/, ""));
        }
    }
    const seen = [];
    for (const m of log.matchAll(/^\s*--- (PASS|FAIL|SKIP): (\S+) \(/gm)) {
        seen.push({ status: m[1], name: m[2] });
    }
    const names = new Set(seen.map((s) => s.name));
    const isParent = (n) => [...names].some((o) => o.startsWith(n + "/"));
    for (const s of seen) {
        if (isParent(s.name)) continue; // only leaves count
        const top = s.name.split("/")[0];
        put(fileOf.get(top) ?? "?", s.name, s.status);
    }
    // Panics and build failures: surface the first lines of trouble.
    const panic = log.match(/^panic: .*$/m);
    if (panic) notes.push(`go test panicked: ${panic[0]}`);
    const build = log.match(/^(# \S+|.*\[build failed\]|.*\[setup failed\])$/m);
    if (build) notes.push(`go build problem: ${build[0]}`);
} else if (flavour === "node") {
    const json = readIf(primary);
    if (json) {
        const data = JSON.parse(json);
        for (const tr of data.testResults ?? []) {
            const file = path.basename(tr.name).replace(/\.e2e\.test\.ts$/, "").replace(/-/g, "_");
            const ar = tr.assertionResults ?? [];
            for (const a of ar) {
                const status =
                    a.status === "passed" ? "PASS" : a.status === "failed" ? "FAIL" : "SKIP";
                const note =
                    status === "FAIL" && a.failureMessages?.length
                        ? a.failureMessages[0].split("\n")[0].slice(0, 200)
                        : "";
                put(file, a.fullName ?? a.title, status, note);
            }
            if (tr.status === "failed" && ar.length === 0) {
                notes.push(
                    `${file}: file failed before any test ran: ${String(tr.message ?? "").split("\n")[0].slice(0, 300)}`
                );
                put(file, "(file setup)", "FAIL", "file failed before any test ran");
            }
        }
    } else {
        // No JSON (killed by the timeout): fall back to the verbose reporter's lines.
        const log = readIf(secondary) ?? "";
        notes.push("no vitest JSON report (run killed or crashed); read the verbose log instead");
        for (const m of log.matchAll(/^\s*([✓×↓])\s+(\S+\.e2e\.test\.ts) > (.+?)(?:\s+\d+m?s)?$/gm)) {
            const status = m[1] === "✓" ? "PASS" : m[1] === "×" ? "FAIL" : "SKIP";
            const file = path.basename(m[2]).replace(/\.e2e\.test\.ts$/, "").replace(/-/g, "_");
            put(file, m[3].replace(/ > /g, " "), status);
        }
    }
} else {
    console.error(`report.mjs: unknown flavour ${flavour}`);
    process.exit(2);
}

// Apply the manifest: every listed test is counted, reported or not.
if (manifestPath && manifestPath !== "-") {
    const lines = (readIf(manifestPath) ?? "").split("\n").filter((l) => l.trim() && !l.startsWith("#"));
    for (const l of lines) {
        const [file, name] = l.split("\t");
        if (!results.has(`${file}\t${name}`)) {
            put(file, name, "FAIL", "not run: no result reported (setup failure, crash or timeout)");
        }
    }
    // A go parent that failed before its subtests ran is already represented by
    // its listed subtests; drop the parent line so it is not counted twice.
    const listed = new Set(lines.map((l) => l.split("\t")[1]));
    const listedFiles = new Set(lines.map((l) => l.split("\t")[0]));
    for (const [key] of [...results]) {
        const [file, name] = key.split("\t");
        if (!listed.has(name) && [...listed].some((n) => n.startsWith(name + "/"))) {
            notes.push(`${name} failed before its subtests ran (counted via its subtests)`);
            results.delete(key);
        } else if (name === "(file setup)" && listedFiles.has(file)) {
            results.delete(key); // its listed tests already count as not run
        }
    }
}

let passed = 0;
let failed = 0;
let skipped = 0;
const perFile = new Map();
const keys = [...results.keys()].sort();
for (const key of keys) {
    const [file, name] = key.split("\t");
    const { status, note } = results.get(key);
    const pf = perFile.get(file) ?? { pass: 0, fail: 0, skip: 0 };
    if (status === "PASS") (passed++, pf.pass++);
    else if (status === "FAIL") (failed++, pf.fail++);
    else (skipped++, pf.skip++);
    perFile.set(file, pf);
    console.log(`${status} ${file}: ${name}${note ? `  -- ${note}` : ""}`);
}
if (rc !== 0 && failed === 0) {
    // The runner failed but no test did (build error, timeout with nothing listed...).
    failed++;
    console.log(`FAIL (runner): exit status ${rc} with no failing test reported`);
}
for (const n of notes) console.log(`# note: ${n}`);
for (const [file, pf] of [...perFile].sort()) {
    console.log(`# ${file}: pass=${pf.pass} fail=${pf.fail} skip=${pf.skip}`);
}
console.log(`# skipped: ${skipped}`);
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 && passed > 0 ? 0 : 1);
