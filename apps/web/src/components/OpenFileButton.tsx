// "Open file" beside a file of a diff: shows the tab's Files view with that path open. Outside a workspace tab (the
// default thread of a non-engineer) there is no Files view, so there is no button either.
'use client';

import { NO_WORKBENCH, useWorkbench } from '../lib/workbench.ts';
import './OpenFileButton.css';

export function OpenFileButton({ path }: { path: string }) {
  const workbench = useWorkbench();
  if (workbench === NO_WORKBENCH) return null;
  return (
    <button type="button" className="btn btn-small open-file" onClick={() => workbench.openFile(path)} aria-label={`Open ${path} in Files`} title="Show this file in the Files view">
      Open file
    </button>
  );
}
