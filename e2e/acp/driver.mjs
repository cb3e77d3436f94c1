// A small editor for the end-to-end tests of `tandem acp` (e2e/acp_test.go):
// the official ACP TypeScript SDK's client, connected to the agent command
// given as arguments, and driven by the Go test over this process's stdio,
// one JSON object per line.
//
// Commands (stdin):   {"id", "op": "request", "method", "params"}
//                     {"id", "op": "notify", "method", "params"}
//                     {"id", "op": "raw", "line"}        a line written to the agent as is
//                     {"id", "op": "answer", "rid", "response"}  answers a permission request
// Reports (stdout):   {"ev": "result", "id", "result"} | {"ev": "error", "id", "error"}
//                     {"ev": "update", "params"}          a session/update
//                     {"ev": "permission", "rid", "params"}
//                     {"ev": "withdrawn", "rid"}          the agent cancelled a permission request
//                     {"ev": "wire", "line"}              every line the agent wrote to its stdout
//                     {"ev": "exit", "code"}
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

const [cmd, ...args] = process.argv.slice(2);
const child = spawn(cmd, args, { stdio: ["pipe", "pipe", "inherit"] });

const report = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");

// The agent's stdout goes to the SDK, and every line of it to the test,
// which checks that nothing but protocol messages comes out.
let tail = "";
const toSDK = new TransformStream();
const sdkWriter = toSDK.writable.getWriter();
child.stdout.on("data", (chunk) => {
  tail += chunk.toString("utf8");
  let i;
  while ((i = tail.indexOf("\n")) >= 0) {
    report({ ev: "wire", line: tail.slice(0, i) });
    tail = tail.slice(i + 1);
  }
  sdkWriter.write(new Uint8Array(chunk));
});
child.stdout.on("end", () => sdkWriter.close().catch(() => {}));
child.on("exit", (code) => report({ ev: "exit", code }));

const toAgent = Writable.toWeb(child.stdin);
const stream = acp.ndJsonStream(toAgent, toSDK.readable);

// Raw lines share the agent's stdin with the SDK: they go through the
// same writer, between two of its messages.
const agentWriter = {
  raw(line) {
    child.stdin.write(line + "\n");
  },
};

const pending = new Map();
let nextRid = 0;

const app = acp
  .client({ name: "tandem-e2e" })
  .onNotification(acp.methods.client.session.update, ({ params }) => {
    report({ ev: "update", params });
  })
  .onRequest(acp.methods.client.session.requestPermission, ({ params, signal }) => {
    const rid = ++nextRid;
    return new Promise((resolve, reject) => {
      pending.set(rid, resolve);
      signal.addEventListener("abort", () => {
        pending.delete(rid);
        report({ ev: "withdrawn", rid });
        reject(new Error("withdrawn"));
      });
      report({ ev: "permission", rid, params });
    });
  });

const conn = app.connect(stream);

const rl = createInterface({ input: process.stdin });
rl.on("line", async (line) => {
  let c;
  try {
    c = JSON.parse(line);
  } catch (e) {
    report({ ev: "error", id: null, error: { message: "driver: bad command: " + e.message } });
    return;
  }
  try {
    switch (c.op) {
      case "request": {
        const result = await conn.agent.request(c.method, c.params);
        report({ ev: "result", id: c.id, result: result ?? null });
        break;
      }
      case "notify":
        await conn.agent.notify(c.method, c.params);
        report({ ev: "result", id: c.id, result: null });
        break;
      case "raw":
        agentWriter.raw(c.line);
        report({ ev: "result", id: c.id, result: null });
        break;
      case "answer": {
        const resolve = pending.get(c.rid);
        pending.delete(c.rid);
        if (resolve) resolve(c.response);
        report({ ev: "result", id: c.id, result: resolve ? "answered" : "gone" });
        break;
      }
      default:
        throw new Error("driver: unknown op " + c.op);
    }
  } catch (e) {
    report({ ev: "error", id: c.id, error: { code: e.code, message: e.message, data: e.data } });
  }
});
rl.on("close", () => {
  child.stdin.end();
});
