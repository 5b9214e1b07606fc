// `grove start`: reopen a stopped workspace.
import { workspaceAction } from './workspace-action.ts';

export const start = workspaceAction('start', { method: 'POST', suffix: '/start' }, 'reopen a stopped workspace');
