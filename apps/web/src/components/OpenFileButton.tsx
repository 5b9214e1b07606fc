// "Open file" beside a file of a diff: shows the tab's Files view with that path open. Outside a workspace tab (the
// default thread of a non-engineer) there is no Files view, so there is no button either. Its name is only "Open file"
// (the path is in the row beside it), so it never matches a query for the file's own button.
'use client';

import { NO_WORKBENCH, useWorkbench } from '../lib/workbench.ts';
import './OpenFileButton.css';

export function OpenFileButton({ path }: { path: string }) {
  const workbench = useWorkbench();
  if (workbench === NO_WORKBENCH) return null;
  return (
    <button type="button" className="btn btn-small open-file" onClick={() => workbench.openFile(path)} title={`Show ${path} in the Files view`}>
      Open file
    </button>
  );
}
