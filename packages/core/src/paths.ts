import { isAbsolute, join, relative, resolve, sep } from 'node:path';
import { GroveError, nameSchema, parseOrThrow, parseSlug, projectNameSchema, slugSchema, warmIdSchema } from '@grove/contracts';

/**
 * Every host path Grove touches, built from validated segments and then checked to lie under its root
 * before any filesystem or git call sees it (the path-traversal guard of DESIGN.md section 2).
 */
export interface GrovePaths {
  home: string;
  db: string;
  reposRoot: string;
  worktreesRoot: string;
  threadsRoot: string;
  runRoot: string;
  stateRoot: string;
  locksRoot: string;
  archiveRoot: string;
  /** Per-project config files (agent, allowed paths): docs/agents.md. Host-only, never mounted. */
  configRoot: string;
  /** Per-project config-parity overlay files (docs/git-flow.md). Host-only; never mounted wholesale. */
  overlaysRoot: string;
  /** The sandboxes' own git dirs (HEAD, index): agent-writable, never read by host git. */
  sandboxGitRoot: string;
  /** Per-workspace object stores for turn snapshots and saved work: host-only, never mounted. */
  objectsRoot: string;
  /** Per-workspace disk images (the quota of what the agent can write). */
  volumesRoot: string;
  /** Host-only scratch space on the same filesystem as home (staged indexes, imports): never mounted. */
  scratchRoot: string;
  /** The warm sandboxes' own dirs (<home>/pool/<id>/…), renamed to a workspace's paths when a fork claims one. */
  poolRoot: string;
  /** <home>/pool/<id>: one warm sandbox's dirs. */
  warm(id: string): string;
  /** <home>/overlays/<project>: the project's overlay files at their repository-relative paths. */
  overlay(project: string): string;
  /** The bare primary clone; it is the common git dir of every worktree of the project. */
  repo(project: string): string;
  worktreesOf(project: string): string;
  worktree(project: string, name: string): string;
  thread(slug: string): string;
  run(slug: string): string;
  socket(slug: string): string;
  /** The workspace's egress gate: <run>/<slug>/egress.sock, /run/grove/egress.sock in its sandbox. */
  egressSocket(slug: string): string;
  state(slug: string): string;
  /** <home>/sandbox-git/<slug>: the git dir the sandbox's /workspace/.git names (mounted read-write). */
  sandboxGit(slug: string): string;
  /** <home>/objects/<slug>.git: a bare store of this workspace's private objects and refs (host-only). */
  workspaceObjects(slug: string): string;
  /** <home>/volumes/<slug>: this workspace's disk images and their mount points. */
  volume(slug: string): string;
  lockFile(project: string): string;
  /** <home>/config/<project>.json */
  projectConfig(project: string): string;
  /** <archive>/<slug>-<compact UTC timestamp>, e.g. demo~x-20250101T120000123Z. */
  archiveFor(slug: string, at: Date): string;
}

export function validProject(project: unknown): string {
  return parseOrThrow(projectNameSchema, project, { what: 'project name', code: 'invalid_name' });
}

/** Workspace names as stored; unlike the fork schema this admits the reserved default name. */
export function validName(name: unknown): string {
  return parseOrThrow(nameSchema, name, { what: 'workspace name', code: 'invalid_name' });
}

/**
 * Slugs already found valid: validity is a function of the string alone, and the proxy asks for every request
 * (socketFor validates, then names the socket), where the schemas were a tenth of the front door's own time.
 * Bounded, so a stream of distinct slugs cannot grow it.
 */
const knownSlugs = new Set<string>();

export function validSlug(slug: unknown): string {
  if (typeof slug === 'string' && knownSlugs.has(slug)) return slug;
  const s = parseOrThrow(slugSchema, slug, { what: 'slug', code: 'invalid_name' });
  const { project, name } = parseSlug(s);
  validProject(project);
  validName(name);
  if (knownSlugs.size >= 4096) knownSlugs.clear();
  knownSlugs.add(s);
  return s;
}

/** Resolve segments under root and refuse anything that escapes it (or is the root itself). */
export function under(root: string, ...segments: string[]): string {
  const p = resolve(root, ...segments);
  const rel = relative(root, p);
  if (rel === '' || rel === '..' || rel.startsWith(`..${sep}`) || isAbsolute(rel)) {
    throw new GroveError('invalid_name', `path ${JSON.stringify(segments.join('/'))} escapes ${root}`);
  }
  return p;
}

function stamp(at: Date): string {
  return at.toISOString().replace(/[-:.]/g, '');
}

export function createPaths(home: string): GrovePaths {
  const h = resolve(home);
  const roots = {
    reposRoot: join(h, 'repos'),
    worktreesRoot: join(h, 'worktrees'),
    threadsRoot: join(h, 'threads'),
    runRoot: join(h, 'run'),
    stateRoot: join(h, 'state'),
    locksRoot: join(h, 'locks'),
    archiveRoot: join(h, 'archive'),
    configRoot: join(h, 'config'),
    overlaysRoot: join(h, 'overlays'),
    sandboxGitRoot: join(h, 'sandbox-git'),
    objectsRoot: join(h, 'objects'),
    volumesRoot: join(h, 'volumes'),
    scratchRoot: join(h, 'tmp'),
    poolRoot: join(h, 'pool'),
  };
  const sockets = new Map<string, string>();
  return {
    home: h,
    db: join(h, 'grove.db'),
    ...roots,
    repo: (project) => under(roots.reposRoot, validProject(project)),
    worktreesOf: (project) => under(roots.worktreesRoot, validProject(project)),
    worktree: (project, name) => under(roots.worktreesRoot, validProject(project), validName(name)),
    thread: (slug) => under(roots.threadsRoot, validSlug(slug)),
    run: (slug) => under(roots.runRoot, validSlug(slug)),
    socket: (slug) => {
      // Once per proxied request (socketFor): the same slug always names the same path under this root.
      let p = sockets.get(slug);
      if (p === undefined) {
        p = under(roots.runRoot, validSlug(slug), 'backend.sock');
        if (sockets.size >= 4096) sockets.clear();
        sockets.set(slug, p);
      }
      return p;
    },
    egressSocket: (slug) => under(roots.runRoot, validSlug(slug), 'egress.sock'),
    state: (slug) => under(roots.stateRoot, validSlug(slug)),
    sandboxGit: (slug) => under(roots.sandboxGitRoot, validSlug(slug)),
    workspaceObjects: (slug) => under(roots.objectsRoot, `${validSlug(slug)}.git`),
    volume: (slug) => under(roots.volumesRoot, validSlug(slug)),
    warm: (id) => under(roots.poolRoot, parseOrThrow(warmIdSchema, id, { what: 'warm sandbox id', code: 'invalid_name' })),
    lockFile: (project) => under(roots.locksRoot, `${validProject(project)}.lock`),
    overlay: (project) => under(roots.overlaysRoot, validProject(project)),
    projectConfig: (project) => under(roots.configRoot, `${validProject(project)}.json`),
    archiveFor: (slug, at) => under(roots.archiveRoot, `${validSlug(slug)}-${stamp(at)}`),
  };
}
