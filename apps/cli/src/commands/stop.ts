// `grove stop`: free a workspace's sandbox slot, keeping everything.
import { workspaceAction } from './workspace-action.ts';

export const stop = workspaceAction('stop', { method: 'POST', suffix: '/stop' }, 'stop a workspace (frees a sandbox slot, keeps everything)');
