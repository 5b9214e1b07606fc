// Where `/` lands: which project's conversation, and whether it has begun.
import type { Workspace } from '@grove/contracts';

export type LandingChoice =
  | { kind: 'none' }
  | { kind: 'empty' }
  | { kind: 'unknown'; project: string }
  | { kind: 'fresh'; project: string }
  | { kind: 'found'; workspace: Workspace };

/** Every project by name: the project list's (null: it could not be read) and any a workspace names, sorted. */
export function projectNames(projects: readonly string[] | null, workspaces: readonly Workspace[]): string[] {
  return [...new Set([...(projects ?? []), ...workspaces.map((w) => w.project)])].sort();
}

/**
 * The projects' conversations as everyone sees them: their live default workspaces. A failed one is not: it holds
 * nothing (it failed while being created), and the project's next first message begins a new one.
 */
export function conversations(workspaces: readonly Workspace[]): Workspace[] {
  return workspaces.filter((w) => w.isDefault && w.state !== 'gone' && w.state !== 'failed');
}

/**
 * The asked project's conversation (`/?project=`, from the conversation picker), else the first project's by name
 * that has one, so the choice is stable across reloads; a project whose conversation has not begun yet (added with
 * the API or `grove project add`, or whose default failed or was torn down) is `fresh`: it begins with its first
 * message. `projects` null: the list could not be read (the workspaces still name the projects they belong to).
 */
export function pickLanding(workspaces: Workspace[], projects: string[] | null, wanted: string | null): LandingChoice {
  const defaults = conversations(workspaces).sort((a, b) => a.project.localeCompare(b.project));
  const names = projectNames(projects, workspaces);
  const project = wanted ?? defaults[0]?.project ?? names[0];
  // The server registers its demo before it listens: a project list read empty means there is none to wait for.
  if (project === undefined) return projects === null ? { kind: 'none' } : { kind: 'empty' };
  const workspace = defaults.find((w) => w.project === project);
  if (workspace) return { kind: 'found', workspace };
  return names.includes(project) ? { kind: 'fresh', project } : { kind: 'unknown', project };
}
