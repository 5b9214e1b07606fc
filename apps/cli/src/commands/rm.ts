// `grove rm`: tear a workspace down; its branch is kept.
import { endpoints } from '@grove/contracts';
import { workspaceAction } from './workspace-action.ts';

export const rm = workspaceAction('rm', endpoints.teardown, 'tear a workspace down (its branch is kept)');
