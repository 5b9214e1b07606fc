import { z } from 'zod';
import { projectNameSchema } from './names.ts';

/**
 * Merge-back through pull requests (docs/git-flow.md): projects from real repositories, host-side
 * checkpoints, the diff against the fork point, and publishing a branch as a pull request.
 */

// eslint-disable-next-line no-control-regex
const CONTROL = /[\x00-\x1f\x7f]/;
const SCP_LIKE = /^[A-Za-z0-9._-]+@[A-Za-z0-9][A-Za-z0-9.-]*:[A-Za-z0-9._~/+][A-Za-z0-9._~/+-]*$/;

/** Which kind of source a project was added from; decides how it is cloned and fetched. */
export function sourceKind(source: string): 'path' | 'file' | 'https' | 'http' | 'ssh' | 'scp' | null {
  if (source.startsWith('/')) return 'path';
  if (SCP_LIKE.test(source)) return 'scp';
  const m = /^([a-z][a-z0-9+.-]*):\/\//.exec(source);
  if (!m) return null;
  const scheme = m[1];
  return scheme === 'file' || scheme === 'https' || scheme === 'http' || scheme === 'ssh' ? scheme : null;
}

/**
 * A repository to clone: an absolute local path, a file://, https://, http:// or ssh:// URL, or scp-like
 * user@host:path. Anything else (ext::, fd::, a relative path, a leading "-") is refused before git sees it.
 */
export const projectSourceSchema = z
  .string({ error: 'source must be a string' })
  .min(1, { error: 'source must not be empty' })
  .max(4096, { error: 'source must be at most 4096 characters' })
  .refine((s) => !s.startsWith('-'), { error: 'source must not start with "-"' })
  .refine((s) => !CONTROL.test(s), { error: 'source must not contain control characters' })
  .refine((s) => !s.includes('::'), { error: 'git transport helpers (<transport>::<address>) are not allowed' })
  .refine((s) => sourceKind(s) !== null, {
    error: 'source must be an absolute path, a file://, https://, http:// or ssh:// URL, or user@host:path',
  })
  // A password in a URL would be stored in the primary clone's config and in the registry.
  .refine((s) => !/^[a-z]+:\/\/[^/@]*:[^/@]*@/.test(s), { error: 'source must not carry a password; use an ssh key or a credential-free URL' });

/**
 * GROVE_GIT_SSH_COMMAND: the ssh Grove's remote git runs (e.g. `ssh -i /etc/grove/deploy_key -o
 * UserKnownHostsFile=/etc/grove/known_hosts`), for a deploy key or a known_hosts of its own instead of the server
 * user's ~/.ssh. The program must be ssh; Grove puts `-o BatchMode=yes -o ConnectTimeout=15` right after it, and
 * ssh keeps the first value of an option, so it never prompts whatever follows.
 */
export const gitSshCommandSchema = z
  .string()
  .min(1)
  .max(1024)
  .refine((s) => !CONTROL.test(s), { error: 'GROVE_GIT_SSH_COMMAND must not contain control characters' })
  .refine((s) => /^(\/[A-Za-z0-9._/-]*\/)?ssh(\s|$)/.test(s), { error: 'GROVE_GIT_SSH_COMMAND must start with ssh (or an absolute path to ssh)' });

/** POST /api/projects */
export const addProjectRequestSchema = z
  .object({
    name: projectNameSchema,
    source: projectSourceSchema,
  })
  .strict();
export type AddProjectRequest = z.infer<typeof addProjectRequestSchema>;

/** `git` in a project config: the identity of host checkpoints, and whether turns checkpoint by themselves. */
export const gitSettingsSchema = z
  .object({
    authorName: z
      .string()
      .min(1)
      .max(200)
      .refine((s) => !CONTROL.test(s) && !/[<>]/.test(s), { error: 'authorName must not contain control characters, < or >' })
      .default('Grove'),
    authorEmail: z
      .string()
      .min(3)
      .max(254)
      .regex(/^[^\s<>@]+@[^\s<>@]+$/, { error: 'authorEmail must look like name@host' })
      .default('grove@localhost'),
    /**
     * Checkpoint after every turn that changed files, with the turn's first message line as the commit
     * subject, and after every undo of such a turn (docs/git-flow.md). Default true: the branch always holds
     * what the thread shows, so nothing waits in a worktree for a teardown to save it.
     */
    checkpointAfterTurn: z.boolean().default(true),
  })
  .strict();
export type GitSettings = z.infer<typeof gitSettingsSchema>;
export const DEFAULT_GIT_SETTINGS: GitSettings = { authorName: 'Grove', authorEmail: 'grove@localhost', checkpointAfterTurn: true };

const forgeSegment = z
  .string()
  .min(1)
  .max(100)
  .regex(/^[A-Za-z0-9_.-]+$/, { error: 'owner and repo are letters, digits, _ . -' })
  .refine((s) => s !== '.' && s !== '..', { error: 'owner and repo must not be . or ..' });

/** Where pull requests are opened. The token is never here: it comes from the server's GROVE_FORGE_TOKEN. */
export const forgeConfigSchema = z
  .object({
    kind: z.enum(['gitea', 'github']),
    /** Gitea: the instance's root URL (the API is <baseUrl>/api/v1). GitHub: https://api.github.com (default) or an Enterprise API root. */
    baseUrl: z
      .url({ protocol: /^https?$/, error: 'baseUrl must be an http(s) URL' })
      .refine((u) => u.startsWith('https://') || /^http:\/\/(127\.\d+\.\d+\.\d+|localhost|\[::1\])(:\d+)?(\/|$)/.test(u), {
        error: 'baseUrl must use https (plain http only to a loopback address): the token is sent there',
      })
      .refine((u) => !/^[a-z]+:\/\/[^/]*@/.test(u), { error: 'baseUrl must not carry credentials' })
      .optional(),
    owner: forgeSegment,
    repo: forgeSegment,
  })
  .strict()
  .refine((f) => f.kind === 'github' || f.baseUrl !== undefined, { error: 'a gitea forge needs its baseUrl', path: ['baseUrl'] });
export type ForgeConfig = z.infer<typeof forgeConfigSchema>;

export const pullRequestStateSchema = z.enum(['open', 'closed', 'merged']);
export const pullRequestSchema = z.object({
  url: z.string(),
  number: z.number().int().positive(),
  state: pullRequestStateSchema,
});
export type PullRequest = z.infer<typeof pullRequestSchema>;

const messageSchema = z
  .string()
  .min(1, { error: 'message must not be empty' })
  .max(10_000)
  .refine((s) => !s.includes('\0'), { error: 'message must not contain NUL' });

/** POST /api/workspaces/:slug/checkpoint */
export const checkpointRequestSchema = z.object({ message: messageSchema.optional() }).strict();
export type CheckpointRequest = z.infer<typeof checkpointRequestSchema>;
export const checkpointResponseSchema = z.object({
  /** The new tip of the branch; null when there was nothing to commit (the branch did not move). */
  commit: z.string().nullable(),
  branch: z.string(),
  /** Paths that changed in this commit (empty when commit is null). */
  files: z.array(z.string()),
});
export type CheckpointResponse = z.infer<typeof checkpointResponseSchema>;

export const diffFileSchema = z.object({
  path: z.string(),
  /** A added, M modified, D deleted, T type changed, R renamed (path is the new name, from the old). */
  status: z.enum(['A', 'M', 'D', 'T', 'R']),
  from: z.string().optional(),
  /** null for binary files. */
  additions: z.number().int().nonnegative().nullable(),
  deletions: z.number().int().nonnegative().nullable(),
});
export const diffResponseSchema = z.object({
  branch: z.string(),
  defaultBranch: z.string(),
  /** The fork point: merge-base of the branch and the default branch. */
  base: z.string(),
  /** The branch tip. */
  head: z.string(),
  /** The worktree holds changes not yet checkpointed; they are included in files and patch. */
  uncommitted: z.boolean(),
  /** Commits on the branch not on the default branch, and the reverse. */
  ahead: z.number().int().nonnegative(),
  behind: z.number().int().nonnegative(),
  files: z.array(diffFileSchema),
  /** Unified diff, cut at maxBytes (truncated says so). */
  patch: z.string(),
  truncated: z.boolean(),
});
export type DiffResponse = z.infer<typeof diffResponseSchema>;
export const diffQuerySchema = z.object({ maxBytes: z.coerce.number().int().min(1024).max(16 * 1024 * 1024).optional() });

/** POST /api/workspaces/:slug/publish */
export const publishRequestSchema = z
  .object({
    title: z.string().min(1).max(256).refine((s) => !s.includes('\0')).optional(),
    body: z.string().max(65_536).refine((s) => !s.includes('\0')).optional(),
    /** Commit message of the checkpoint taken before pushing, when there is anything to commit. */
    message: messageSchema.optional(),
  })
  .strict();
export type PublishRequest = z.infer<typeof publishRequestSchema>;
export const publishResponseSchema = z.object({
  checkpoint: checkpointResponseSchema,
  /** What was pushed: the branch and its tip. */
  pushed: z.object({ branch: z.string(), commit: z.string() }),
  pullRequest: pullRequestSchema,
});
export type PublishResponse = z.infer<typeof publishResponseSchema>;

/** The part of a Gitea or GitHub pull request (REST) that the forge adapters read; both send much more. */
export const forgePullSchema = z.object({
  number: z.number().int().positive(),
  html_url: z.url(),
  state: z.string(),
  merged: z.boolean().nullish(),
  merged_at: z.string().nullish(),
  /** The head commit: what was merged (or the branch's tip when it was closed). */
  head: z.object({ sha: z.string().regex(/^[0-9a-f]{40,64}$/).nullish() }).nullish(),
});

/** A check of a pull request's head commit, as the Review view shows it: green, red, or still running. */
export const checkStateSchema = z.enum(['success', 'failure', 'pending']);
export type CheckState = z.infer<typeof checkStateSchema>;

/** At most this many checks are kept of one head commit (a forge can report hundreds). */
export const MAX_CHECKS = 100;

export const pullRequestCheckSchema = z.object({
  /** The status's context (Gitea, GitHub statuses) or the check run's name (GitHub). */
  name: z.string().max(200),
  state: checkStateSchema,
  /** Where the forge says the check's details are; only http(s) links are passed on. */
  url: z.string().nullable(),
  description: z.string().max(500).nullable(),
});
export type PullRequestCheck = z.infer<typeof pullRequestCheckSchema>;

/** Every check of the head commit, and the verdict: failure if any failed, else pending if any runs, else success ('none': no checks). */
export const pullRequestChecksSchema = z.object({
  state: z.enum(['success', 'failure', 'pending', 'none']),
  total: z.number().int().nonnegative(),
  success: z.number().int().nonnegative(),
  failure: z.number().int().nonnegative(),
  pending: z.number().int().nonnegative(),
  checks: z.array(pullRequestCheckSchema).max(MAX_CHECKS),
});
export type PullRequestChecks = z.infer<typeof pullRequestChecksSchema>;

/**
 * GET /api/workspaces/:slug/pull-request: the workspace's pull request as its forge reports it now (state and the
 * checks of its head commit), or null when it was never published; and what a merge or close does to the workspace.
 */
export const pullRequestResponseSchema = z.object({
  pullRequest: pullRequestSchema.extend({ headSha: z.string().nullable() }).nullable(),
  /** null when the forge names no head commit. */
  checks: pullRequestChecksSchema.nullable(),
  cleanup: z.object({
    /** The checkout (and sandbox) stay when the pull request ends: the workspace's keepCheckoutOnClose, else the project's. */
    keepCheckout: z.boolean(),
    /** Whose setting that is. */
    setBy: z.enum(['workspace', 'project']),
    /** Why the watcher kept the workspace after the pull request ended (work a cleanup would remove), or null. */
    held: z.string().nullable(),
  }),
});
export type PullRequestResponse = z.infer<typeof pullRequestResponseSchema>;

/** A Gitea or GitHub combined commit status (GET .../commits/{sha}/status), the part the adapters read. */
export const forgeCombinedStatusSchema = z.object({
  statuses: z
    .array(
      z.object({
        context: z.string().nullish(),
        state: z.string().nullish(),
        /** GitHub calls it target_url; Gitea sends target_url too (older versions also status). */
        target_url: z.string().nullish(),
        description: z.string().nullish(),
      }),
    )
    .nullish(),
});

/** GitHub's check runs of a commit (GET .../commits/{sha}/check-runs), the part the adapter reads. */
export const forgeCheckRunsSchema = z.object({
  check_runs: z.array(
    z.object({
      name: z.string().nullish(),
      status: z.string().nullish(),
      conclusion: z.string().nullish(),
      html_url: z.string().nullish(),
      details_url: z.string().nullish(),
    }),
  ),
});

// ---- the config-parity overlay (docs/git-flow.md) ----

/** The files a workspace gets from the user's checkout when the project config names none. */
export const DEFAULT_OVERLAY_FILES = ['.claude/settings.local.json', '.claude/*', '.mcp.json', '.env', '.envrc'] as const;

/**
 * Names that steer git itself: overlaid, they would change what the host's snapshots contain (.gitignore,
 * .gitattributes) or where submodules come from (.gitmodules); `.git` is the repository.
 */
const GIT_PLUMBING = new Set(['.git', '.gitignore', '.gitattributes', '.gitmodules']);
const OVERLAY_SEGMENT = /^[A-Za-z0-9._@+-]+$/;
const OVERLAY_LAST_SEGMENT = /^[A-Za-z0-9._@+*?-]+$/;

/** Why an overlay entry is refused, or null when it is fine. Shared by the config schema and core's checks. */
export function overlayPathProblem(p: string, o: { glob: boolean }): string | null {
  if (p.length === 0 || p.length > 256) return 'must be 1 to 256 characters';
  if (p.startsWith('/')) return 'must be relative to the workspace root (no leading /)';
  const segments = p.split('/');
  for (const [i, s] of segments.entries()) {
    const last = i === segments.length - 1;
    if (s === '' || s === '.' || s === '..') return 'must not contain empty, "." or ".." segments';
    if (!(last && o.glob ? OVERLAY_LAST_SEGMENT : OVERLAY_SEGMENT).test(s)) {
      return o.glob
        ? 'may use letters, digits and . _ @ + - (and * ? in its last segment only)'
        : 'may use letters, digits and . _ @ + - only';
    }
    if (GIT_PLUMBING.has(s)) return `must not name git plumbing (${[...GIT_PLUMBING].join(', ')})`;
  }
  return null;
}

const overlayGlobSchema = z.string().superRefine((p, ctx) => {
  const problem = overlayPathProblem(p, { glob: true });
  if (problem) ctx.addIssue({ code: 'custom', message: `overlay entry ${JSON.stringify(p)} ${problem}` });
});

/**
 * `overlay` in a project config: the user's local files a workspace needs that git does not carry. Each entry is
 * a path relative to the repository root, `*` and `?` allowed in its last segment. `writable` entries (each also
 * in `files`) are copied into the worktree at fork; the others are mounted read-only. Absent `files`: the defaults.
 */
export const overlayConfigSchema = z
  .object({
    files: z.array(overlayGlobSchema).max(64).optional(),
    writable: z.array(overlayGlobSchema).max(64).optional(),
  })
  .strict()
  .superRefine((o, ctx) => {
    const files: readonly string[] = o.files ?? DEFAULT_OVERLAY_FILES;
    for (const w of o.writable ?? []) {
      if (!files.includes(w)) ctx.addIssue({ code: 'custom', path: ['writable'], message: `writable entry ${JSON.stringify(w)} must also be in overlay.files` });
    }
  });
export type OverlayConfig = z.infer<typeof overlayConfigSchema>;

/** One overlay file is at most this many bytes. */
export const OVERLAY_MAX_BYTES = 1024 * 1024;

/** A single overlay file's path (no globs), as the overlay API takes it. */
export const overlayFilePathSchema = z.string().superRefine((p, ctx) => {
  const problem = overlayPathProblem(p, { glob: false });
  if (problem) ctx.addIssue({ code: 'custom', message: `overlay path ${JSON.stringify(p)} ${problem}` });
});

/** PUT /api/projects/:project/overlay: set one file's content (UTF-8 text). */
export const putOverlayFileRequestSchema = z
  .object({
    path: overlayFilePathSchema,
    content: z.string().max(OVERLAY_MAX_BYTES, { error: `content must be at most ${OVERLAY_MAX_BYTES} bytes` }),
  })
  .strict();
export type PutOverlayFileRequest = z.infer<typeof putOverlayFileRequestSchema>;

/** DELETE /api/projects/:project/overlay?path= */
export const overlayPathQuerySchema = z.object({ path: overlayFilePathSchema }).strict();

export const overlayFileSchema = z.object({ path: z.string(), writable: z.boolean(), size: z.number().int().nonnegative() });
export type OverlayFileInfo = z.infer<typeof overlayFileSchema>;

/** GET, PUT and DELETE /api/projects/:project/overlay: the project's overlay files after the call. */
export const overlayListResponseSchema = z.object({ files: z.array(overlayFileSchema) });
export type OverlayListResponse = z.infer<typeof overlayListResponseSchema>;
