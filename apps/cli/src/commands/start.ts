// `grove start`: reopen a stopped workspace.
import { endpoints } from '@grove/contracts';
import { workspaceAction } from './workspace-action.ts';

export const start = workspaceAction('start', endpoints.start, 'reopen a stopped workspace');
