// What a workbench view (Terminal, Files, Preview) shows while its workspace is not running: why it is empty, and
// Reopen when it is stopped (in line or starting, it fills by itself). Those views read from the sandbox, so they have
// nothing else to show; one component keeps them alike.
'use client';

import { useState } from 'react';
import type { Workspace, WorkspaceState } from '@grove/contracts';
import { api, messageOf } from '../lib/api.ts';
import { ErrorText } from './ui.tsx';
import './StoppedView.css';

interface Props {
  slug: string;
  workspace: Workspace;
  /** Called after the start was accepted, so the pane re-reads the workspace. */
  onChanged: () => void;
  /** What lives in the sandbox, so the view is empty: "terminals run in its sandbox". */
  lives: string;
  /** The whole sentence while stopped, when the view has more to say than what lives there. */
  whenStopped?: string;
}

/** How a workspace that is not running is, in the view's sentence. */
const STATE_WORDS: Record<Exclude<WorkspaceState, 'running' | 'stopped'>, string> = {
  queued: 'waiting in line for a sandbox',
  creating: 'starting',
  'tearing-down': 'being torn down',
  gone: 'torn down',
  failed: 'failed',
};

export function StoppedView({ slug, workspace, onChanged, lives, whenStopped }: Props) {
  const [reopening, setReopening] = useState(false);
  const [error, setError] = useState<string | null>(null);

  const reopen = async () => {
    setReopening(true);
    setError(null);
    try {
      await api.start(slug);
      onChanged();
    } catch (e) {
      setError(messageOf(e));
    } finally {
      setReopening(false);
    }
  };

  const state = workspace.state;
  if (state === 'stopped' || state === 'running') {
    return (
      <div className="stopped-view" role="status">
        <p>{whenStopped ?? `The workspace is stopped; ${lives}.`}</p>
        <button type="button" className="btn" onClick={() => void reopen()} disabled={reopening || state !== 'stopped'}>
          {reopening ? 'Reopening…' : 'Reopen'}
        </button>
        <ErrorText message={error} className="error-text" />
      </div>
    );
  }
  // Nothing to reopen: it is on its way (in line, starting) or has no sandbox any more.
  const onItsWay = state === 'queued' || state === 'creating';
  return (
    <div className="stopped-view" role="status">
      <p>
        The workspace is {STATE_WORDS[state]}; {lives}.{onItsWay ? ' This view fills by itself once it runs.' : ''}
      </p>
    </div>
  );
}
