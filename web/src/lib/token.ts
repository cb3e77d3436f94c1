// The token lives in sessionStorage: it is gone when the tab closes, and each
// tab holds its own. `tandem web` (and `tandem serve` on a terminal) hands the
// page a one-time code in the URL fragment, which the browser never sends to a
// server: the app removes it from the address bar at once and exchanges it,
// once, within a minute, for the token (POST /v1/signin). The token itself is
// never on a browser's command line. A `#token=` fragment is still taken.

const KEY = 'tandem.token';
const CLIENT_KEY = 'tandem.client_id';

/** fromHash splits "#key=V&rest" into V and the fragment left. */
function fromHash(hash: string, key: string): { value: string | null; rest: string } {
  const h = hash.startsWith('#') ? hash.slice(1) : hash;
  if (!h) return { value: null, rest: '' };
  const parts = h.split('&');
  let value: string | null = null;
  const rest: string[] = [];
  const prefix = key + '=';
  for (const p of parts) {
    if (p.startsWith(prefix)) {
      const raw = p.slice(prefix.length);
      try {
        value = decodeURIComponent(raw.replace(/\+/g, ' '));
      } catch {
        value = raw;
      }
    } else if (p) rest.push(p);
  }
  return { value: value || null, rest: rest.join('&') };
}

/** tokenFromHash splits "#token=T&rest" into the token and the fragment left. */
export function tokenFromHash(hash: string): { token: string | null; rest: string } {
  const { value, rest } = fromHash(hash, 'token');
  return { token: value, rest };
}

/** codeFromHash splits "#code=C&rest" into the one-time sign-in code and the fragment left. */
export function codeFromHash(hash: string): { code: string | null; rest: string } {
  const { value, rest } = fromHash(hash, 'code');
  return { code: value, rest };
}

/**
 * signIn returns the token to use. A one-time code in the fragment is taken
 * out of the URL at once (it works only once anyway) and exchanged for the
 * token, which is stored; without one, takeToken's. error says why a code did
 * not sign in (used, expired, or the server unreachable).
 */
export async function signIn(
  loc: Location = location,
  storage: Storage = sessionStorage,
  hist: History = history,
  fetchImpl: typeof fetch = (...a) => fetch(...a),
): Promise<{ token: string | null; error?: string }> {
  const { code, rest } = codeFromHash(loc.hash);
  if (!code) return { token: takeToken(loc, storage, hist) };
  hist.replaceState(hist.state, '', loc.pathname + loc.search + (rest ? '#' + rest : ''));
  try {
    const resp = await fetchImpl('/v1/signin', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ code }),
      cache: 'no-store',
    });
    if (resp.ok) {
      const body = (await resp.json()) as { token?: unknown };
      if (typeof body.token === 'string' && body.token) {
        storage.setItem(KEY, body.token);
        return { token: body.token };
      }
    }
    const why = resp.status === 401 ? 'was already used or has expired (it works once, within a minute)' : `was refused (HTTP ${resp.status})`;
    return { token: storage.getItem(KEY), error: `The sign-in link ${why}: run tandem web for a new one, or paste a token.` };
  } catch (e) {
    return { token: storage.getItem(KEY), error: `Could not sign in with the link: ${String(e)}` };
  }
}

/** takeToken returns the token to use: the URL fragment's (then stored and removed from the URL), else the stored one. */
export function takeToken(loc: Location = location, storage: Storage = sessionStorage, hist: History = history): string | null {
  const { token, rest } = tokenFromHash(loc.hash);
  if (token) {
    storage.setItem(KEY, token);
    hist.replaceState(hist.state, '', loc.pathname + loc.search + (rest ? '#' + rest : ''));
    return token;
  }
  return storage.getItem(KEY);
}

export function storeToken(token: string, storage: Storage = sessionStorage) {
  storage.setItem(KEY, token);
}

export function forgetToken(storage: Storage = sessionStorage) {
  storage.removeItem(KEY);
}

/** clientId is this tab's client_id: made once, kept across reloads of the tab. */
export function clientId(storage: Storage = sessionStorage): string {
  let id = storage.getItem(CLIENT_KEY);
  if (!id) {
    id = uuid();
    storage.setItem(CLIENT_KEY, id);
  }
  return id;
}

/** uuid is a random (v4) UUID; crypto.randomUUID needs a secure context, which a LAN address is not. */
export function uuid(): string {
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}
