import { useState } from 'preact/hooks';
import type { AppState } from '../lib/controller';
import { storeToken } from '../lib/token';

export function TokenScreen({ state }: { state: AppState }) {
  const [token, setToken] = useState('');
  const submit = (e: Event) => {
    e.preventDefault();
    const t = token.trim();
    if (!t) return;
    storeToken(t);
    // A fresh start with the new token: the simplest honest state.
    location.reload();
  };
  return (
    <main class="center-screen">
      <form class="card token-card" onSubmit={submit}>
        <h1>Tandem</h1>
        {state.me && (
          <p data-testid="signed-in-as">
            Signed in as <strong>{state.me.name}</strong> ({state.me.role}). Paste another token to switch.
          </p>
        )}
        {state.auth === 'refused' ? (
          <p class="error" role="alert" data-testid="auth-error">
            {state.authMessage}
          </p>
        ) : (
          <p>
            This server needs its token. Run <code>tandem web</code> to open the app signed in, or paste the token from{' '}
            <code>DATA_DIR/token</code>.
          </p>
        )}
        {state.auth === 'needed' && state.authMessage && (
          <p class="error" role="alert">
            {state.authMessage}
          </p>
        )}
        <label for="token">Token</label>
        <input
          id="token"
          type="password"
          autocomplete="off"
          spellcheck={false}
          value={token}
          onInput={(e) => setToken((e.target as HTMLInputElement).value)}
          autoFocus
        />
        <button type="submit" class="primary" disabled={!token.trim()}>
          Connect
        </button>
        <p class="hint">The token stays in this tab (sessionStorage) and is sent only to this server.</p>
      </form>
    </main>
  );
}
