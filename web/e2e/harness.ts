// The pieces the end-to-end tests run: a fake OpenAI-compatible model that
// streams scripted chunks, the real tandem binary, a TCP proxy that can cut
// connections, and a Playwright fixture tying them together.

import { test as base, expect, type Page, type BrowserContext } from '@playwright/test';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const TOKEN = 'e2e-token-5f1c9a';
export const ARTIFACTS = fileURLToPath(new URL('../e2e-artifacts/', import.meta.url));

// ---- fake model ----

/** Usage a step reports, in Tandem's convention: input counts every token read, cached ones too. */
export interface StepUsage {
  input: number;
  output: number;
  cacheRead?: number;
  reasoning?: number;
}

export interface Step {
  text?: string[];
  reasoning?: string[];
  toolCalls?: { id: string; name: string; args: unknown }[];
  /** delay between chunks, ms */
  delay?: number;
  /** after this many content chunks, wait for gate to resolve */
  holdAfter?: number;
  gate?: Promise<void>;
  status?: number;
  /**
   * usage is reported in a last chunk when the request asks for it
   * (stream_options.include_usage), as OpenAI does. Unset: sized from the
   * request (about 4 bytes a token) and the answer.
   */
  usage?: StepUsage;
}

export type Script = (n: number, body: any) => Step;

/** FakeModel speaks OpenAI's streaming Chat Completions, as e2e/fakemodel_test.go does for the Go tests. */
export class FakeModel {
  script: Script = () => ({ text: ['ok'] });
  requests: any[] = [];
  private waiters: { n: number; resolve: () => void }[] = [];
  private constructor(
    private server: http.Server,
    readonly url: string,
  ) {}

  static async start(): Promise<FakeModel> {
    let self: FakeModel;
    const server = http.createServer((req, res) => void self.serve(req, res));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const { port } = server.address() as net.AddressInfo;
    self = new FakeModel(server, `http://127.0.0.1:${port}/v1`);
    return self;
  }

  /** requested resolves once n requests have come in. */
  requested(n: number): Promise<void> {
    if (this.requests.length >= n) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ n, resolve }));
  }

  close() {
    this.server.closeAllConnections();
    return new Promise<void>((r) => this.server.close(() => r()));
  }

  private async serve(req: http.IncomingMessage, res: http.ServerResponse) {
    let raw = '';
    for await (const c of req) raw += c;
    let body: any = {};
    try {
      body = JSON.parse(raw);
    } catch {
      /* recorded as is */
    }
    const n = this.requests.length;
    this.requests.push(body);
    this.waiters = this.waiters.filter((w) => (this.requests.length >= w.n ? (w.resolve(), false) : true));
    const s = this.script(n, body);
    if (s.status) {
      res.writeHead(s.status, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ error: { message: `scripted failure ${s.status}`, type: 'server_error', code: null } }));
      return;
    }
    res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache' });
    const chunk = (delta: unknown, finish: string | null = null) =>
      'data: ' +
      JSON.stringify({ id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1, model: 'fake', choices: [{ index: 0, delta, finish_reason: finish }] }) +
      '\n\n';
    const out: string[] = [chunk({ role: 'assistant', content: '' })];
    const content: string[] = [];
    for (const r of s.reasoning ?? []) content.push(chunk({ reasoning_content: r }));
    for (const t of s.text ?? []) content.push(chunk({ content: t }));
    (s.toolCalls ?? []).forEach((c, i) => {
      const args = JSON.stringify(c.args);
      const half = Math.floor(args.length / 2);
      content.push(chunk({ tool_calls: [{ index: i, id: c.id, type: 'function', function: { name: c.name, arguments: args.slice(0, half) } }] }));
      content.push(chunk({ tool_calls: [{ index: i, function: { arguments: args.slice(half) } }] }));
    });
    out.push(...content);
    out.push(chunk({}, s.toolCalls?.length ? 'tool_calls' : 'stop'));
    if (body?.stream_options?.include_usage === true) {
      const written = [...(s.reasoning ?? []), ...(s.text ?? []), ...(s.toolCalls ?? []).map((c) => JSON.stringify(c.args))].join('');
      const u = s.usage ?? { input: Math.ceil(raw.length / 4), output: Math.ceil(written.length / 4) + 1 };
      out.push(
        'data: ' +
          JSON.stringify({
            id: 'chatcmpl-1',
            object: 'chat.completion.chunk',
            created: 1,
            model: 'fake',
            choices: [],
            usage: {
              prompt_tokens: u.input,
              completion_tokens: u.output,
              total_tokens: u.input + u.output,
              prompt_tokens_details: { cached_tokens: u.cacheRead ?? 0 },
              completion_tokens_details: { reasoning_tokens: u.reasoning ?? 0 },
            },
          }) +
          '\n\n',
      );
    }
    out.push('data: [DONE]\n\n');
    let closed = false;
    res.on('close', () => (closed = true));
    for (let i = 0; i < out.length; i++) {
      if (closed) return;
      res.write(out[i]);
      if (s.holdAfter !== undefined && i === s.holdAfter && s.gate) await Promise.race([s.gate, new Promise((r) => res.on('close', r))]);
      else if (s.delay && i > 0 && i < out.length - 2) await new Promise((r) => setTimeout(r, s.delay));
    }
    res.end();
  }
}

/** gate returns a promise and the function that resolves it. */
export function gate(): [Promise<void>, () => void] {
  let open!: () => void;
  const p = new Promise<void>((r) => (open = r));
  return [p, open];
}

// ---- the tandem binary ----

export async function freePort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const { port } = srv.address() as net.AddressInfo;
  await new Promise((r) => srv.close(r));
  return port;
}

export class Tandem {
  private constructor(
    readonly proc: ChildProcess,
    readonly url: string,
    readonly port: number,
    readonly dataDir: string,
    readonly logs: string[],
  ) {}

  /** start runs `tandem serve`; config is the path of a configuration file (models' windows and prices). */
  static async start(o: { dataDir: string; modelURL: string; port?: number; config: string }): Promise<Tandem> {
    const bin = process.env.TANDEM_E2E_BIN;
    if (!bin) throw new Error('TANDEM_E2E_BIN is not set: run through playwright (its global setup builds tandem)');
    const port = o.port ?? (await freePort());
    const proc = spawn(
      bin,
      [
        'serve',
        '--addr',
        `127.0.0.1:${port}`,
        '--data-dir',
        o.dataDir,
        '--token',
        TOKEN,
        '--model',
        'openai/fake',
        '--detach-grace',
        '3s',
        '--heartbeat',
        '2s',
        // Always a file of the test's own: a configuration of the machine's
        // user must not change what the tests see.
        '--config',
        o.config,
      ],
      {
        env: { ...process.env, OPENAI_BASE_URL: o.modelURL, OPENAI_API_KEY: 'fake-key', TANDEM_LOG_LEVEL: 'warn' },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    const logs: string[] = [];
    proc.stderr!.on('data', (d) => logs.push(String(d)));
    const url = await new Promise<string>((resolve, reject) => {
      let out = '';
      const timer = setTimeout(() => reject(new Error('tandem did not start: ' + logs.join(''))), 20_000);
      proc.stdout!.on('data', (d) => {
        out += String(d);
        const m = /tandem listening on (http:\/\/\S+)/.exec(out);
        if (m) {
          clearTimeout(timer);
          resolve(m[1]);
        }
      });
      proc.on('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`tandem exited ${code}: ${logs.join('')}`));
      });
    });
    return new Tandem(proc, url, port, o.dataDir, logs);
  }

  /** stop sends SIGTERM (a clean stop) or SIGKILL and waits for the exit. */
  async stop(signal: NodeJS.Signals = 'SIGTERM') {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    const done = new Promise((r) => this.proc.once('exit', r));
    this.proc.kill(signal);
    await done;
  }

  async api<T = any>(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: T }> {
    const resp = await fetch(this.url + path, {
      method,
      headers: { Authorization: `Bearer ${TOKEN}`, ...(body !== undefined ? { 'Content-Type': 'application/json' } : {}), ...headers },
      body: body !== undefined ? JSON.stringify(body) : undefined,
    });
    const text = await resp.text();
    return { status: resp.status, body: text ? JSON.parse(text) : undefined };
  }

  /** attach opens an event stream (a claim that keeps the workspace open) until the returned function is called. */
  async attach(wid: string): Promise<() => void> {
    const ac = new AbortController();
    const resp = await fetch(`${this.url}/v1/workspaces/${wid}/events?client_id=${crypto.randomUUID()}`, {
      headers: { Authorization: `Bearer ${TOKEN}` },
      signal: ac.signal,
    });
    if (resp.status !== 200) throw new Error(`attach: ${resp.status}`);
    const reader = resp.body!.getReader();
    void (async () => {
      try {
        while (!(await reader.read()).done);
      } catch {
        /* aborted */
      }
    })();
    return () => ac.abort();
  }

  async must<T = any>(method: string, path: string, body?: unknown): Promise<T> {
    const r = await this.api<T>(method, path, body);
    if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${JSON.stringify(r.body)}`);
    return r.body;
  }
}

// ---- a proxy that can cut every connection ----

export class CutProxy {
  private sockets = new Set<net.Socket>();
  private constructor(
    private server: net.Server,
    readonly port: number,
  ) {}

  static async start(target: number): Promise<CutProxy> {
    let self: CutProxy;
    const server = net.createServer((client) => {
      const upstream = net.connect(target, '127.0.0.1');
      self.sockets.add(client).add(upstream);
      const drop = () => {
        client.destroy();
        upstream.destroy();
        self.sockets.delete(client);
        self.sockets.delete(upstream);
      };
      client.on('error', drop).on('close', drop);
      upstream.on('error', drop).on('close', drop);
      client.pipe(upstream);
      upstream.pipe(client);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    self = new CutProxy(server, (server.address() as net.AddressInfo).port);
    return self;
  }

  get url() {
    return `http://127.0.0.1:${this.port}`;
  }

  /** cut drops every open connection, as a network failure would. */
  cut() {
    for (const s of this.sockets) s.destroy();
    this.sockets.clear();
  }

  close() {
    this.cut();
    return new Promise<void>((r) => this.server.close(() => r()));
  }
}

// ---- fixtures ----

export interface Env {
  fake: FakeModel;
  tandem: Tandem;
  /** the project directory the workspace is opened on */
  workDir: string;
  dataDir: string;
  /** restart stops tandem (SIGTERM) and starts it again on the same port and data dir. */
  restart(): Promise<Tandem>;
}

export const test = base.extend<{ env: Env; tandemConfig: object }>({
  /** tandemConfig is the server's configuration file (test.use({ tandemConfig: {models: ...} })). */
  tandemConfig: [{}, { option: true }],
  env: async ({ tandemConfig }, use) => {
    const root = mkdtempSync(join(tmpdir(), 'tandem-e2e-'));
    const workDir = join(root, 'project');
    const dataDir = join(root, 'data');
    const config = join(root, 'config.json');
    mkdirSync(workDir);
    writeFileSync(config, JSON.stringify(tandemConfig));
    const fake = await FakeModel.start();
    let tandem = await Tandem.start({ dataDir, modelURL: fake.url, config });
    const env: Env = {
      fake,
      get tandem() {
        return tandem;
      },
      workDir,
      dataDir,
      async restart() {
        await tandem.stop();
        tandem = await Tandem.start({ dataDir, modelURL: fake.url, port: tandem.port, config });
        return tandem;
      },
    };
    await use(env);
    await tandem.stop();
    await fake.close();
    rmSync(root, { recursive: true, force: true });
  },
});

export { expect };

// ---- page helpers ----

/**
 * watch records what a page must never do: open a dialog, throw, or have
 * the CSP refuse something in the page itself. (DOMPurify parses untrusted
 * HTML into a detached, script-less document of its own; Chromium reports
 * the handlers it meets there as CSP refusals on that document, which is
 * why only refusals whose target belongs to the page count.)
 */
export function watch(page: Page) {
  const problems: string[] = [];
  page.on('dialog', (d) => {
    problems.push(`dialog: ${d.message()}`);
    void d.dismiss();
  });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('console', (m) => {
    if (m.text().startsWith('CSP-VIOLATION')) problems.push(m.text());
  });
  void page.addInitScript(() => {
    document.addEventListener(
      'securitypolicyviolation',
      (e) => {
        const t = e.target as Node | null;
        if (t === document || t?.ownerDocument === document) {
          console.log('CSP-VIOLATION', e.violatedDirective, e.sample, (t as Element)?.outerHTML?.slice(0, 200) ?? '#document');
        }
      },
      true,
    );
  });
  return problems;
}

/** openApp loads the app signed in, on the workspace of dir (opened through the UI). */
export async function openWorkspace(page: Page, base: string, dir: string) {
  await page.goto(`${base}/#token=${TOKEN}`);
  await page.getByLabel('Workspace path').fill(dir);
  await page.getByRole('button', { name: 'Open', exact: true }).click();
  await expect(page.getByTestId('conn')).toHaveAttribute('data-state', 'live');
}

/**
 * twoPagesOnANewSession opens the workspace of dir on page a, makes a new
 * session there, and opens the same session live on a page b of a context
 * of its own (another person). Both pages are watched for problems.
 */
export async function twoPagesOnANewSession(a: Page, base: string, dir: string) {
  const problemsA = watch(a);
  await openWorkspace(a, base, dir);
  await a.getByRole('button', { name: '+ New session' }).first().click();
  await expect(a).toHaveURL(/\/s\/[0-9a-f-]{36}$/);
  const hash = new URL(a.url()).hash.slice(1);
  const wid = /\/w\/([0-9a-f-]{36})/.exec(hash)![1];
  const sid = /\/s\/([0-9a-f-]{36})/.exec(hash)![1];
  const ctxB = await a.context().browser()!.newContext();
  const b = await ctxB.newPage();
  const problemsB = watch(b);
  await b.goto(`${base}/#token=${TOKEN}&${hash}`);
  await expect(b.getByTestId('conn')).toHaveAttribute('data-state', 'live');
  return { b, ctxB, wid, sid, problemsA, problemsB };
}

export async function clientIdOf(page: Page): Promise<string> {
  return page.evaluate(() => sessionStorage.getItem('tandem.client_id')!);
}

export async function newContext(page: Page): Promise<BrowserContext> {
  return page.context().browser()!.newContext();
}

/** shot saves a screenshot of page as e2e-artifacts/screenshots/NAME.png (not committed). */
export async function shot(page: Page, name: string) {
  const dir = join(ARTIFACTS, 'screenshots');
  mkdirSync(dir, { recursive: true });
  await page.screenshot({ path: join(dir, `${name}.png`) });
}

export function assistantTexts(page: Page) {
  return page.getByTestId('msg-assistant').locator('.md').allInnerTexts();
}
