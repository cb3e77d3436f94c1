import type { Controller } from '../lib/controller';
import { Ctl, useAppState } from './context';
import { TokenScreen } from './TokenScreen';
import { WorkspacePicker } from './WorkspacePicker';
import { WorkspaceView } from './WorkspaceView';
import { Toasts } from './Toasts';

export function App({ controller }: { controller: Controller }) {
  const st = useAppState(controller);
  let body;
  if (st.auth === 'needed' || st.auth === 'refused') body = <TokenScreen state={st} />;
  else if (st.auth === 'checking') body = <div class="splash" aria-busy="true">Connecting to Tandem…</div>;
  else if (!st.workspaceId) body = <WorkspacePicker state={st} />;
  else body = <WorkspaceView state={st} />;
  return (
    <Ctl.Provider value={controller}>
      {body}
      <Toasts toasts={st.toasts} />
    </Ctl.Provider>
  );
}
