import { z } from 'zod';

/** Rules for project and workspace names, each with the message a user sees when it fails. */
const NAME_MAX = 39;

export const nameSchema = z
  .string({ error: 'name must be a string' })
  .min(1, { error: 'name must not be empty' })
  .max(NAME_MAX, { error: `name must be at most ${NAME_MAX} characters` })
  .regex(/^[\u0020-\u007e]*$/, { error: 'name must use plain ASCII letters (no look-alike characters)' })
  .regex(/^[^A-Z]*$/, { error: 'name must be lowercase' })
  .regex(/^[a-z0-9]/, { error: 'name must start with a letter or digit' })
  .regex(/^[a-z0-9-]*$/, { error: 'name may contain only a-z, 0-9 and "-" (no "/", "~", "." or spaces)' });

export const projectNameSchema = nameSchema;
/** The default workspace of a project carries this name; forks may not take it. */
export const DEFAULT_WORKSPACE_NAME = 'default';
export const workspaceNameSchema = nameSchema.refine((n) => n !== DEFAULT_WORKSPACE_NAME, {
  error: `name "${DEFAULT_WORKSPACE_NAME}" is reserved for the project's default workspace`,
});

/** Slug = `<project>~<name>`; the project's default workspace has slug `<project>`. */
export const slugSchema = z
  .string()
  .regex(/^[a-z0-9][a-z0-9-]{0,38}(~[a-z0-9][a-z0-9-]{0,38})?$/, { error: 'slug must be <project> or <project>~<name>' });

export type Slug = z.infer<typeof slugSchema>;

export function makeSlug(project: string, name: string): string {
  return name === DEFAULT_WORKSPACE_NAME ? project : `${project}~${name}`;
}

export function parseSlug(slug: string): { project: string; name: string } {
  const [project = '', name] = slug.split('~');
  return { project, name: name ?? DEFAULT_WORKSPACE_NAME };
}

/**
 * Recovery refs: where the host saves a worktree's uncommitted work before removing it, as
 * `refs/grove/<slug with "~" as "+">/teardown/<n>` ("~" is not allowed in git ref names; "+" never
 * appears in a name, so the mapping is reversible). They are never moved or deleted by Grove.
 */
export const RECOVERY_REF_PATTERN = /^refs\/grove\/([a-z0-9][a-z0-9-]{0,38}(?:\+[a-z0-9][a-z0-9-]{0,38})?)\/teardown\/([1-9][0-9]{0,8})$/;

export function recoveryRefPrefix(slug: string): string {
  return `refs/grove/${slug.replace('~', '+')}/teardown/`;
}

export function recoveryRef(slug: string, n: number): string {
  return `${recoveryRefPrefix(slug)}${n}`;
}

/** The slug and number of a recovery ref, or null when ref is not one. */
export function parseRecoveryRef(ref: string): { slug: string; n: number } | null {
  const m = RECOVERY_REF_PATTERN.exec(ref);
  if (!m?.[1] || !m[2]) return null;
  return { slug: m[1].replace('+', '~'), n: Number(m[2]) };
}
