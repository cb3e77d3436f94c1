// The token lives in sessionStorage: it is gone when the tab closes, and each
// tab holds its own. `tandem web` hands it over in the URL fragment, which the
// browser never sends to a server; the app removes it from the address bar at
// once so it stays out of history and screenshots.

const KEY = 'tandem.token';
const CLIENT_KEY = 'tandem.client_id';

/** tokenFromHash splits "#token=T&rest" into the token and the fragment left. */
export function tokenFromHash(hash: string): { token: string | null; rest: string } {
  const h = hash.startsWith('#') ? hash.slice(1) : hash;
  if (!h) return { token: null, rest: '' };
  const parts = h.split('&');
  let token: string | null = null;
  const rest: string[] = [];
  for (const p of parts) {
    if (p.startsWith('token=')) {
      try {
        token = decodeURIComponent(p.slice(6).replace(/\+/g, ' '));
      } catch {
        token = p.slice(6);
      }
    } else if (p) rest.push(p);
  }
  return { token: token || null, rest: rest.join('&') };
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
