/**
 * Projects: registering a repository (the hardened bare clone, docs/git-flow.md), its config file and its
 * config-parity overlay. Each operation reads the project's config once and passes it on; loadProject is that
 * one read for the lifecycle (a fork reads the row and the config together, then hands the config along).
 */
import { existsSync } from 'node:fs';
import { rm, stat } from 'node:fs/promises';
import { resolve } from 'node:path';
import { GroveError, OVERLAY_MAX_BYTES, overlayPathProblem, parseOrThrow, projectSourceSchema, sourceKind } from '@grove/contracts';
import type { OverlayListResponse, ProjectConfig, ProjectConfigInput, ProjectConfigPatch, PutOverlayFileRequest } from '@grove/contracts';
import type { ProjectRow } from '@grove/db';
import { readProjectConfig, readStoredProjectConfig, writeProjectConfig } from './agents.ts';
import { requireProject } from './context.ts';
import type { GroveContext } from './context.ts';
import { defaultBranch as readDefaultBranch, isBareRepo } from './git.ts';
import { recordOverlayPaths } from './git-snapshot.ts';
import { OVERLAY_MAX_FILES, captureOverlay, listOverlay, matchesAny, overlaySettings, removeOverlayFile, writeOverlayFile } from './overlay.ts';
import type { OverlayFile } from './overlay.ts';
import { validProject } from './paths.ts';
import { nowIso } from './registry.ts';
import { cloneBareFrom } from './remote.ts';
import type { AddProjectOptions } from './types.ts';

/** A registered project and its config (defaults applied), read together once per operation. */
export interface LoadedProject {
  project: ProjectRow;
  config: ProjectConfig;
}

/** The project's config file with its defaults applied; {} when it has none; invalid_input when it is broken. */
export async function readConfig(ctx: GroveContext, project: string): Promise<ProjectConfig> {
  return readProjectConfig(ctx.paths.projectConfig(project));
}

/** project_not_found, else the row and the config: a config edited into something invalid is refused here. */
export async function loadProject(ctx: GroveContext, name: string): Promise<LoadedProject> {
  const project = await requireProject(ctx, name);
  return { project, config: await readConfig(ctx, name) };
}

function validSource(source: unknown): string {
  // A relative path that exists is made absolute first; then the same rules as POST /api/projects
  // (no leading "-", no control characters, only path, file, http(s) and ssh sources).
  const s = typeof source === 'string' && !source.startsWith('-') && !source.includes('\0') && !source.includes('://') && existsSync(source) ? resolve(source) : source;
  return parseOrThrow(projectSourceSchema, s, { what: 'project source' });
}

function projectExists(name: string): GroveError {
  return new GroveError('project_exists', `project "${name}" already exists; pick another name or use it as it is`, { details: { project: name } });
}

/**
 * Clone and register a project (addProject without its default workspace, which the lifecycle makes, with the
 * config read or written here). `added`: this call registered it (false: it was there already, and is kept as it is).
 */
export async function registerProject(
  ctx: GroveContext,
  o: AddProjectOptions,
  git: { sshCommand: string | null },
): Promise<{ project: ProjectRow; config: ProjectConfig; added: boolean }> {
  const { paths, store, log } = ctx;
  const name = validProject(o.name);
  const source = validSource(o.source);
  if (o.failIfExists && (await store.project(name))) throw projectExists(name);
  // Checked (and written, when given) before anything else: an unknown agent provider or a bad glob
  // is refused when the project is registered, not at its first turn.
  const configFile = paths.projectConfig(name);
  const hadConfig = existsSync(configFile);
  const config = o.config !== undefined ? await writeProjectConfig(configFile, o.config) : await readProjectConfig(configFile);
  const repo = paths.repo(name);
  let registered: { project: ProjectRow; existing: ProjectRow | undefined };
  try {
    registered = await ctx.lock.withLock(name, async () => {
      const existing = await store.project(name);
      // Again under the lock: of two concurrent requests for one name, the second is refused.
      if (o.failIfExists && existing) throw projectExists(name);
      // A clone no project owns (left by a crash before registration) may be of another source: clone afresh.
      if (!(await isBareRepo(repo)) || !existing) {
        if (existsSync(repo)) {
          log.warn({ project: name }, 'replacing a directory that is not the clone of a registered project');
          await rm(repo, { recursive: true, force: true });
        }
        const t0 = Date.now();
        await cloneBareFrom(source, repo, { sshCommand: git.sshCommand });
        log.info({ project: name, source, ms: Date.now() - t0 }, 'cloned project (bare)');
        if (sourceKind(source) === 'path') await takeOverlay(ctx, name, config, source);
      }
      let defaultBranch: string;
      try {
        defaultBranch = await readDefaultBranch(repo);
      } catch (e) {
        // An empty repository cannot be forked from: refuse it and leave nothing behind.
        if (!existing) await rm(repo, { recursive: true, force: true });
        throw new GroveError('invalid_input', `${source} has no commits on its default branch; push a first commit, then add it`, { cause: e });
      }
      // Registered under the lock, so a concurrent add of the same name sees it.
      return { project: await store.ensureProject({ name, source, defaultBranch, createdAt: nowIso() }), existing };
    });
  } catch (e) {
    if (!hadConfig && o.config !== undefined && !(await store.project(name))) await rm(configFile, { force: true });
    throw e;
  }
  const { project, existing } = registered;
  if (existing && existing.source !== source) {
    log.warn({ project: name, source, existing: existing.source }, 'project exists with another source; keeping it');
  }
  if (!existing) await ctx.emit(name, 'project.added', { project: name, source, defaultBranch: project.defaultBranch });
  return { project, config, added: !existing };
}

/**
 * A project added from a local checkout takes the overlay files found there (docs/git-flow.md). Never fatal:
 * the project works without them. Call under the repository lock, after the clone.
 */
async function takeOverlay(ctx: GroveContext, project: string, config: ProjectConfig, checkout: string): Promise<void> {
  try {
    const settings = overlaySettings(config);
    const dir = ctx.paths.overlay(project);
    await rm(dir, { recursive: true, force: true });
    const r = await captureOverlay({ checkout, repo: ctx.paths.repo(project), dir, settings });
    await recordOverlayPaths(ctx.paths.repo(project), (await listOverlay(dir, settings)).map((f) => f.path));
    if (r.captured.length || r.skipped.length) ctx.log.info({ project, captured: r.captured, skipped: r.skipped }, 'overlay files taken from the checkout');
  } catch (e) {
    ctx.log.warn({ err: e, project }, 'could not take the overlay files from the checkout; the project has none');
  }
}

/**
 * The project's overlay files as they stand, their paths recorded in the repository so no snapshot carries
 * them (git.ts, dropOverlayEntries). Call under the repository lock.
 */
export async function currentOverlay(ctx: GroveContext, project: string, config: ProjectConfig): Promise<OverlayFile[]> {
  const files = await listOverlay(ctx.paths.overlay(project), overlaySettings(config));
  await recordOverlayPaths(ctx.paths.repo(project), files.map((f) => f.path));
  return files;
}

/** The overlay files with sizes. Call under the repository lock. */
async function overlayListing(ctx: GroveContext, project: string, config: ProjectConfig): Promise<OverlayListResponse> {
  const files = await currentOverlay(ctx, project, config);
  const sized = await Promise.all(files.map(async (f) => ({ path: f.path, writable: f.writable, size: (await stat(f.hostPath)).size })));
  return { files: sized };
}

export async function projectConfig(ctx: GroveContext, project: string): Promise<ProjectConfig> {
  return (await loadProject(ctx, validProject(project))).config;
}

export async function overlayFiles(ctx: GroveContext, project: string): Promise<OverlayListResponse> {
  const { config } = await loadProject(ctx, validProject(project));
  return ctx.lock.withLock(project, () => overlayListing(ctx, project, config));
}

/**
 * Refuse an overlay path that could leave the overlay dir or name git plumbing before any file is touched: the
 * request was parsed by the caller, but this is the host's own path guard, like validSlug.
 */
function overlayPath(path: string): string {
  const problem = overlayPathProblem(path, { glob: false });
  if (problem) throw new GroveError('invalid_input', `invalid overlay path: overlay path ${JSON.stringify(path)} ${problem}`, { details: { path } });
  return path;
}

export async function putOverlayFile(ctx: GroveContext, project: string, req: PutOverlayFileRequest): Promise<OverlayListResponse> {
  await requireProject(ctx, validProject(project));
  const path = overlayPath(req.path);
  const content = req.content;
  const bytes = Buffer.from(content, 'utf8');
  if (bytes.length > OVERLAY_MAX_BYTES) throw new GroveError('invalid_input', `overlay file ${path} is ${bytes.length} bytes; at most ${OVERLAY_MAX_BYTES} are allowed`);
  const config = await readConfig(ctx, project);
  const settings = overlaySettings(config);
  if (!matchesAny(settings.files, path)) {
    throw new GroveError('invalid_input', `${path} is not an overlay file of project "${project}": add it (or a glob naming it) to overlay.files in the project config first`, {
      details: { path, overlayFiles: [...settings.files] },
    });
  }
  return ctx.lock.withLock(project, async () => {
    const dir = ctx.paths.overlay(project);
    const existing = await listOverlay(dir, settings);
    if (!existing.some((f) => f.path === path) && existing.length >= OVERLAY_MAX_FILES) {
      throw new GroveError('invalid_input', `project "${project}" already has ${OVERLAY_MAX_FILES} overlay files; delete one first`);
    }
    // Recorded before the file exists: no snapshot can ever see it unlisted.
    await recordOverlayPaths(ctx.paths.repo(project), [...existing.map((f) => f.path), path]);
    await writeOverlayFile(dir, path, bytes);
    ctx.log.info({ project, path, bytes: bytes.length }, 'overlay file set');
    return overlayListing(ctx, project, config);
  });
}

export async function deleteOverlayFile(ctx: GroveContext, project: string, path: string): Promise<OverlayListResponse> {
  await requireProject(ctx, validProject(project));
  const p = overlayPath(path);
  return ctx.lock.withLock(project, async () => {
    await removeOverlayFile(ctx.paths.overlay(project), p);
    ctx.log.info({ project, path: p }, 'overlay file removed');
    // The path stays in the recorded list (recordOverlayPaths only adds): a worktree may still hold a copy.
    return overlayListing(ctx, project, await readConfig(ctx, project));
  });
}

/** `config` as given (checked against projectConfigSchema by the caller); writing it checks it again, as every config file the host writes. */
export async function setProjectConfig(ctx: GroveContext, project: string, config: ProjectConfigInput): Promise<ProjectConfig> {
  const name = validProject(project);
  await requireProject(ctx, name);
  // Applies to containers created from now on (a fork, or a start after a stop); running ones keep theirs.
  return ctx.lock.withLock(name, () => writeProjectConfig(ctx.paths.projectConfig(name), config));
}

/**
 * Change some keys of the stored config (a projectConfigPatchSchema value, as given); read and written under the
 * project's lock. The result is checked as a whole when it is written.
 */
export async function patchProjectConfig(ctx: GroveContext, project: string, patch: ProjectConfigPatch): Promise<ProjectConfig> {
  const name = validProject(project);
  await requireProject(ctx, name);
  return ctx.lock.withLock(name, async () => {
    const file = ctx.paths.projectConfig(name);
    const next = await readStoredProjectConfig(file);
    // The values as given, not as parsed: defaults are applied on reading, never stored.
    for (const [key, value] of Object.entries(patch)) {
      if (value === null) delete next[key];
      else if (value !== undefined) next[key] = value;
    }
    return writeProjectConfig(file, next);
  });
}
