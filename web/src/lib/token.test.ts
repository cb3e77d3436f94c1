import { describe, expect, it } from 'vitest';
import { clientId, codeFromHash, signIn, takeToken, tokenFromHash, uuid } from './token';

function memStorage(): Storage {
  const m = new Map<string, string>();
  return {
    get length() {
      return m.size;
    },
    clear: () => m.clear(),
    getItem: (k) => m.get(k) ?? null,
    key: (i) => [...m.keys()][i] ?? null,
    removeItem: (k) => void m.delete(k),
    setItem: (k, v) => void m.set(k, String(v)),
  };
}

describe('token', () => {
  it('reads the token from the fragment and keeps the rest', () => {
    expect(tokenFromHash('#token=abc')).toEqual({ token: 'abc', rest: '' });
    expect(tokenFromHash('#token=a%20b%26c&/w/x')).toEqual({ token: 'a b&c', rest: '/w/x' });
    expect(tokenFromHash('#/w/x')).toEqual({ token: null, rest: '/w/x' });
    expect(tokenFromHash('')).toEqual({ token: null, rest: '' });
  });

  it('stores the fragment token and removes it from the URL', () => {
    const storage = memStorage();
    const calls: string[] = [];
    const loc = { hash: '#token=s3cret', pathname: '/', search: '' } as Location;
    const hist = { state: null, replaceState: (_s: unknown, _t: string, url: string) => calls.push(url) } as unknown as History;
    expect(takeToken(loc, storage, hist)).toBe('s3cret');
    expect(storage.getItem('tandem.token')).toBe('s3cret');
    expect(calls).toEqual(['/']);
    // Later loads use the stored one and leave the URL alone.
    const loc2 = { hash: '#/w/1', pathname: '/', search: '' } as Location;
    expect(takeToken(loc2, storage, hist)).toBe('s3cret');
    expect(calls).toHaveLength(1);
  });

  it('has no token until one is given', () => {
    const loc = { hash: '', pathname: '/', search: '' } as Location;
    expect(takeToken(loc, memStorage(), history)).toBeNull();
  });

  it('makes one client id per tab', () => {
    const storage = memStorage();
    const id = clientId(storage);
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(clientId(storage)).toBe(id);
    expect(uuid()).not.toBe(uuid());
  });

  it('reads a one-time code from the fragment', () => {
    expect(codeFromHash('#code=abc&/w/x')).toEqual({ code: 'abc', rest: '/w/x' });
    expect(codeFromHash('#token=t')).toEqual({ code: null, rest: 'token=t' });
  });

  it('exchanges a one-time code for the token, once, and drops it from the URL at once', async () => {
    const storage = memStorage();
    const urls: string[] = [];
    const loc = { hash: '#code=c0de&/w/1', pathname: '/', search: '' } as Location;
    const hist = { state: null, replaceState: (_s: unknown, _t: string, url: string) => urls.push(url) } as unknown as History;
    const sent: { url: string; body: string }[] = [];
    const ok = (async (url: string, init: RequestInit) => {
      sent.push({ url, body: String(init.body) });
      expect(urls).toEqual(['/#/w/1']); // gone from the URL before the exchange
      return new Response(JSON.stringify({ token: 's3cret' }), { status: 200 });
    }) as unknown as typeof fetch;
    expect(await signIn(loc, storage, hist, ok)).toEqual({ token: 's3cret' });
    expect(sent).toEqual([{ url: '/v1/signin', body: '{"code":"c0de"}' }]);
    expect(storage.getItem('tandem.token')).toBe('s3cret');

    const used = (async () => new Response('{"error":{}}', { status: 401 })) as unknown as typeof fetch;
    const again = await signIn({ hash: '#code=c0de', pathname: '/', search: '' } as Location, memStorage(), hist, used);
    expect(again.token).toBeNull();
    expect(again.error).toContain('already used or has expired');
  });

  it('without a code, signs in as takeToken does', async () => {
    const storage = memStorage();
    storage.setItem('tandem.token', 'kept');
    const never = (async () => {
      throw new Error('no exchange without a code');
    }) as unknown as typeof fetch;
    expect(await signIn({ hash: '#/w/1', pathname: '/', search: '' } as Location, storage, history, never)).toEqual({ token: 'kept' });
  });
});
