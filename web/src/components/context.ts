import { createContext } from 'preact';
import { useContext, useEffect, useRef, useState } from 'preact/hooks';
import type { AppState, Controller } from '../lib/controller';
import { onHighlighterReady, highlightVersion } from '../lib/markdown';

export const Ctl = createContext<Controller>(null as unknown as Controller);

export const useController = () => useContext(Ctl);

/** useAppState re-renders the caller whenever the controller's state changes. */
export function useAppState(c: Controller): AppState {
  const [, setTick] = useState(0);
  const rendered = useRef(c.state);
  rendered.current = c.state;
  useEffect(() => {
    const off = c.subscribe(() => setTick((n) => n + 1));
    // A change between the render and this effect (start() answering
    // before the browser ran effects) notified nobody: catch up now.
    if (c.state !== rendered.current) setTick((n) => n + 1);
    return off;
  }, [c]);
  return c.state;
}

/** useHighlightVersion re-renders markdown once code highlighting is available. */
export function useHighlightVersion(): number {
  const [v, setV] = useState(highlightVersion());
  useEffect(() => {
    const off = onHighlighterReady(() => setV(highlightVersion()));
    // The highlighter may have arrived between the render and this effect:
    // its notice went to nobody, so look again now that we listen.
    setV(highlightVersion());
    return off;
  }, []);
  return v;
}

/** shortId is how a client is named: the start of its id. */
export const shortId = (id?: string) => (id ? id.slice(0, 4) : '????');

/**
 * personOf is the person behind another client, when it is someone else
 * than the one signed in here: another tab of the same person is told apart
 * by its client, not by a name that would say "you" twice.
 */
export const personOf = (state: AppState, clientId: string, name = state.ws?.names?.[clientId]) =>
  name && name !== state.me?.name ? name : undefined;

/** who names a client to this page's person: you, a person, or another client. */
export const who = (state: AppState, clientId?: string) =>
  !clientId
    ? 'another client'
    : clientId === state.clientId
      ? 'you'
      : (personOf(state, clientId) ?? `client ${shortId(clientId)}`);
