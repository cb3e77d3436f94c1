import { render } from 'preact';
import { Api } from './lib/api';
import { Controller } from './lib/controller';
import { clientId, codeFromHash, signIn, takeToken, tokenFromHash } from './lib/token';
import { App } from './components/App';
import './styles.css';

async function boot() {
  const { token, error } = await signIn();
  const controller = new Controller({ api: new Api(token ?? ''), clientId: clientId() });
  window.addEventListener('hashchange', () => {
    // A new sign-in code or token in the fragment (`tandem web` opened in this tab): start over with it.
    if (codeFromHash(location.hash).code) {
      location.reload();
      return;
    }
    if (tokenFromHash(location.hash).token) {
      takeToken();
      location.reload();
      return;
    }
    controller.applyRoute();
  });
  window.addEventListener('pagehide', () => controller.close());

  render(<App controller={controller} />, document.getElementById('app')!);
  performance.mark('tandem:first-render');
  if (error) controller.toast(error);
  void controller.start();
}

void boot();
