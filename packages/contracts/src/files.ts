// The workspace's files, read by its backend inside the sandbox (through /w/<slug>/files/...): one directory's entries
// at a time with their git status marks, and one file's text. Read-only; nothing here ever follows a link.
import { z } from 'zod';

/** The most text GET /files/content answers; a larger file comes cut there with `truncated`. */
export const FILE_CONTENT_CAP = 512 * 1024;
/** The most entries GET /files/tree answers for one directory; more are cut with `truncated`. */
export const MAX_TREE_ENTRIES = 2000;
/** A path longer than this is refused before anything is read. */
export const MAX_WORKSPACE_PATH = 4096;

/**
 * A path relative to /workspace, as the dashboard sends it: '' is the workspace itself. Refused before the backend
 * touches the disk: a NUL byte, an absolute path, a backslash, and any `..` segment (no escaping the workspace).
 * The backend still resolves it so that a symlink planted on the way cannot lead out either.
 */
export const workspacePathSchema = z
  .string({ error: 'path must be a string' })
  .max(MAX_WORKSPACE_PATH, { error: `path must be at most ${MAX_WORKSPACE_PATH} characters` })
  .refine((p) => !p.includes('\0'), { error: 'path must not contain a NUL byte' })
  .refine((p) => !p.startsWith('/'), { error: 'path must be relative to the workspace, not absolute' })
  .refine((p) => !p.includes('\\'), { error: 'path must use "/" as its separator' })
  .refine((p) => !p.split('/').includes('..'), { error: 'path must not contain ".." (no escaping the workspace)' });

/** The segments of a checked path, without empty and "." ones: 'src//a/./b' is ['src', 'a', 'b']. */
export function workspacePathSegments(path: string): string[] {
  return path.split('/').filter((s) => s !== '' && s !== '.');
}

/** GET /files/tree?path=<dir>: the entries of one directory ('' or absent: the workspace's top). */
export const filesTreeQuerySchema = z.object({ path: workspacePathSchema.default('') }).strict();
export type FilesTreeQuery = z.infer<typeof filesTreeQuerySchema>;

/** GET /files/content?path=<file> */
export const fileContentQuerySchema = z
  .object({ path: workspacePathSchema.refine((p) => workspacePathSegments(p).length > 0, { error: 'path must name a file' }) })
  .strict();
export type FileContentQuery = z.infer<typeof fileContentQuerySchema>;

/**
 * A file's mark from `git status --porcelain`: M modified, A added (staged), D deleted, R renamed, U unmerged,
 * ? untracked. A directory's mark is its most notable descendant's (U, then D, M, A, R, ?).
 */
export const gitMarkSchema = z.enum(['M', 'A', 'D', 'R', 'U', '?']);
export type GitMark = z.infer<typeof gitMarkSchema>;

export const fileKindSchema = z.enum(['file', 'dir', 'symlink', 'other']);
export type FileKind = z.infer<typeof fileKindSchema>;

export const fileEntrySchema = z.object({
  name: z.string(),
  /** From the workspace's top, '/'-separated: what GET /files/tree and /files/content take back. */
  path: z.string(),
  /** `other` is a FIFO, socket or device: listed, never opened. A deleted file (mark D) is a `file` without size. */
  kind: fileKindSchema,
  /** Bytes (lstat), null for a deleted file. */
  size: z.number().int().nonnegative().nullable(),
  mark: gitMarkSchema.nullable(),
  /** A symlink's target as written (never followed), cut at 1024 characters. */
  target: z.string().optional(),
  /** Gone from the disk; git still knows it (mark D): a deleted file, or a directory whose files were all deleted. */
  deleted: z.boolean().optional(),
});
export type FileEntry = z.infer<typeof fileEntrySchema>;

export const filesTreeResponseSchema = z.object({
  path: z.string(),
  /** Directories first, then by name. `.git` is never listed. */
  entries: z.array(fileEntrySchema),
  /** More than MAX_TREE_ENTRIES entries: the rest are left out. */
  truncated: z.boolean(),
  /** Why there are no marks (not a git worktree, git failed or took too long); absent when they are there. */
  gitError: z.string().optional(),
});
export type FilesTreeResponse = z.infer<typeof filesTreeResponseSchema>;

export const fileContentResponseSchema = z.discriminatedUnion('binary', [
  z.object({
    path: z.string(),
    binary: z.literal(false),
    /** Bytes on disk. */
    size: z.number().int().nonnegative(),
    /** UTF-8 text (invalid bytes replaced) of at most FILE_CONTENT_CAP bytes of the file. */
    text: z.string(),
    /** The file is larger than FILE_CONTENT_CAP; `text` is its beginning. */
    truncated: z.boolean(),
  }),
  z.object({
    path: z.string(),
    /** A NUL byte in the file's first 8 KiB: no text is sent. */
    binary: z.literal(true),
    size: z.number().int().nonnegative(),
  }),
]);
export type FileContentResponse = z.infer<typeof fileContentResponseSchema>;
