import { render } from 'preact';
import { Api } from './lib/api';
import { Controller } from './lib/controller';
import { clientId, takeToken, tokenFromHash } from './lib/token';
import { App } from './components/App';
import './styles.css';

const token = takeToken();
const controller = new Controller({ api: new Api(token ?? ''), clientId: clientId() });
window.addEventListener('hashchange', () => {
  // A new token in the fragment (`tandem web` opened in this tab): start over with it.
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
void controller.start();
