// `grove stop`: free a workspace's sandbox slot, keeping everything.
import { endpoints } from '@grove/contracts';
import { workspaceAction } from './workspace-action.ts';

export const stop = workspaceAction('stop', endpoints.stop, 'stop a workspace (frees a sandbox slot, keeps everything)');
