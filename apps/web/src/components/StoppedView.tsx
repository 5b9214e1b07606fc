// What a workbench view (Terminal, Files, Preview) shows while its workspace is not running: why it is empty, and
// Reopen. Those views read from the sandbox, so they have nothing else to show; one component keeps them alike.
'use client';

import { useState } from 'react';
import type { Workspace } from '@grove/contracts';
import { api, messageOf } from '../lib/api.ts';
import { ErrorText } from './ui.tsx';
import './StoppedView.css';

interface Props {
  slug: string;
  workspace: Workspace;
  /** Called after the start was accepted, so the pane re-reads the workspace. */
  onChanged: () => void;
  /** Why the view is empty (says what lives in the sandbox). */
  children: string;
}

export function StoppedView({ slug, workspace, onChanged, children }: Props) {
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

  return (
    <div className="stopped-view" role="status">
      <p>{children}</p>
      {/* Only a stopped workspace can be started; creating or tearing down shows the button, disabled. */}
      <button type="button" className="btn" onClick={() => void reopen()} disabled={reopening || workspace.state !== 'stopped'}>
        {reopening ? 'Reopening…' : 'Reopen'}
      </button>
      <ErrorText message={error} className="error-text" />
    </div>
  );
}
