// The views of a workspace tab (conversation, terminal, files, preview, review) and how one view asks the tab to show another.
'use client';

import { createContext, useContext } from 'react';

export type PaneView = 'conversation' | 'terminal' | 'files' | 'preview' | 'review';

export interface WorkbenchApi {
  /** Show a view of this tab. */
  show: (view: PaneView) => void;
  /** Show the files view with this worktree path open (from a diff's "Open file"). */
  openFile: (path: string) => void;
  /** The file the files view was last asked to open, with a counter so asking twice opens it again. */
  requestedFile: { path: string; seq: number } | null;
  /** Show the preview view with this port chosen (from the conversation's ports row). */
  showPreview: (port: number) => void;
  /** The port the preview view was last asked to show, with a counter so asking twice shows it again. */
  requestedPreview: { port: number; seq: number } | null;
}

/** What useWorkbench answers outside a workspace tab: compare with it to leave out what needs a tab. */
export const NO_WORKBENCH: WorkbenchApi = {
  show: () => undefined,
  openFile: () => undefined,
  requestedFile: null,
  showPreview: () => undefined,
  requestedPreview: null,
};

export const WorkbenchContext = createContext<WorkbenchApi>(NO_WORKBENCH);

/** The tab's workbench; outside a workspace tab (the default thread of a non-engineer) it does nothing. */
export function useWorkbench(): WorkbenchApi {
  return useContext(WorkbenchContext);
}
