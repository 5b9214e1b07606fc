// Whether a workspace's sandbox and checkout stay when its pull request is merged or closed: the project's
// setting, or this workspace's own choice over it (PATCH /api/workspaces/:slug; null goes back to the
// project's). The branch is kept either way. Shared by the card and the tab's Changes panel.
'use client';

import { useEffect, useId, useState } from 'react';
import type { Workspace } from '@grove/contracts';
import { api, messageOf } from '../lib/api.ts';
import { onProjectKeep } from '../lib/project-settings.ts';
import { ErrorText, Spinner } from './ui.tsx';
import './KeepCheckout.css';

type Choice = 'project' | 'keep' | 'clean';

const choiceOf = (v: boolean | null | undefined): Choice => (v === true ? 'keep' : v === false ? 'clean' : 'project');
const VALUE: Record<Choice, boolean | null> = { project: null, keep: true, clean: false };

/** The setting only matters while there is a checkout to keep; a failed or gone workspace has none. */
export function hasKeepCheckout(w: Workspace): boolean {
  return !w.isDefault && (w.state === 'running' || w.state === 'stopped' || w.state === 'queued' || w.state === 'creating');
}

/**
 * Whether a card carries the setting: once there is a pull request to end, or the workspace has its own choice.
 * Before that it would sit on every card of the board for nothing; the tab's Changes panel always has it. Once
 * shown it stays while the card does, so choosing "Project setting" does not take the control from under the pointer.
 */
export function useKeepOnCard(w: Workspace): boolean {
  const wanted = hasKeepCheckout(w) && (w.pullRequest != null || w.keepCheckoutOnClose != null);
  const [shown, setShown] = useState(wanted);
  if (wanted && !shown) setShown(true);
  return hasKeepCheckout(w) && (wanted || shown);
}

export function KeepCheckoutSetting({ workspace: w, className, onChanged }: { workspace: Workspace; className: string; onChanged?: () => void }) {
  const id = useId();
  const helpId = useId();
  const [choice, setChoice] = useState<Choice>(choiceOf(w.keepCheckoutOnClose));
  const [saving, setSaving] = useState(false);
  const [error, setError] = useState<string | null>(null);
  // What "the project's setting" means here, so the choice is not a guess; null until read (or when it cannot be).
  const [projectKeeps, setProjectKeeps] = useState<boolean | null>(null);

  // Follows the server when the workspace is read again (changed in another tab or with `grove keep-checkout`).
  useEffect(() => setChoice(choiceOf(w.keepCheckoutOnClose)), [w.keepCheckoutOnClose]);

  useEffect(() => {
    let live = true;
    api.projectConfig(w.project).then(
      ({ config }) => live && setProjectKeeps(config.keepCheckoutOnClose === true),
      () => undefined,
    );
    return () => {
      live = false;
    };
  }, [w.project]);
  // Changed in the Project settings dialog: no event says so, that dialog does.
  useEffect(() => onProjectKeep((project, keeps) => project === w.project && setProjectKeeps(keeps)), [w.project]);

  const change = async (next: Choice) => {
    const before = choice;
    setChoice(next);
    setSaving(true);
    setError(null);
    try {
      const { workspace } = await api.updateWorkspace(w.slug, { keepCheckoutOnClose: VALUE[next] });
      setChoice(choiceOf(workspace.keepCheckoutOnClose));
      // No event is written for a setting, so the list (or the tab) is told to read the workspace again.
      onChanged?.();
    } catch (e) {
      setChoice(before);
      setError(`Not saved: ${messageOf(e)}`);
    } finally {
      setSaving(false);
    }
  };

  return (
    <div className={className}>
      <label htmlFor={id}>When its pull request is merged or closed</label>
      <span className="keep-control">
        <select id={id} value={choice} onChange={(e) => void change(e.target.value as Choice)} disabled={saving} aria-describedby={helpId}>
          <option value="project">{projectKeeps === null ? 'Project setting' : `Project setting: ${projectKeeps ? 'keep the checkout' : 'clean up'}`}</option>
          <option value="keep">Keep the checkout</option>
          <option value="clean">Clean up</option>
        </select>
        {saving ? <Spinner label="Saving" /> : null}
      </span>
      <span id={helpId} className="sr-only">
        Clean up removes the sandbox and the checkout, never while they hold work the branch does not have; the branch itself is always kept.
      </span>
      <ErrorText message={error} className="field-error" />
    </div>
  );
}
