// `grove rm`: tear a workspace down; its branch is kept.
import { workspaceAction } from './workspace-action.ts';

export const rm = workspaceAction('rm', { method: 'DELETE', suffix: '' }, 'tear a workspace down (its branch is kept)');
