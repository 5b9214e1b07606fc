// The table of `grove` commands, in the order `grove --help` lists them.
import type { CliCommand } from '../command.ts';
import { checkpoint } from './checkpoint.ts';
import { diff } from './diff.ts';
import { down } from './down.ts';
import { fork } from './fork.ts';
import { keepCheckout } from './keep-checkout.ts';
import { logs } from './logs.ts';
import { ls } from './ls.ts';
import { projectAdd } from './project-add.ts';
import { projectConfig } from './project-config.ts';
import { overlayLs } from './project-overlay-ls.ts';
import { overlayRm } from './project-overlay-rm.ts';
import { overlaySet } from './project-overlay-set.ts';
import { projects } from './projects.ts';
import { publish } from './publish.ts';
import { restore } from './restore.ts';
import { resume } from './resume.ts';
import { rm } from './rm.ts';
import { send } from './send.ts';
import { start } from './start.ts';
import { stop } from './stop.ts';
import { up } from './up.ts';

export const COMMANDS: readonly CliCommand[] = [
  up,
  down,
  ls,
  fork,
  send,
  keepCheckout,
  resume,
  restore,
  stop,
  start,
  rm,
  logs,
  {
    name: 'project',
    description: 'manage projects (repositories Grove forks workspaces from)',
    commands: [
      projectAdd,
      projectConfig,
      // The config-parity overlay: the user's local files (.env, .claude/settings.local.json, ...) that workspaces
      // get and that never enter a commit (docs/git-flow.md).
      { name: 'overlay', description: "a project's overlay: local files its workspaces get that git does not carry (never committed)", commands: [overlayLs, overlaySet, overlayRm] },
    ],
  },
  projects,
  checkpoint,
  diff,
  publish,
];
