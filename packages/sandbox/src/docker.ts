// The Docker implementation of SandboxDriver: one hardened container per workspace (DESIGN.md s5).
import { createHash } from 'node:crypto';
import { isAbsolute, normalize } from 'node:path';
import Docker from 'dockerode';
import type { ContainerCreateOptions, ContainerInspectInfo, MountSettings } from 'dockerode';
import { GroveError, overlayPathProblem, parseOrThrow, parseSlug, projectNameSchema, sandboxRuntimeSchema, slugSchema, warmIdSchema } from '@grove/contracts';
import type { SandboxRuntime } from '@grove/contracts';
import { BACKEND_GID, BACKEND_UID, SANDBOX_CAPS, SANDBOX_GID, SANDBOX_PATHS, SANDBOX_UID } from './types.ts';
import type { DockerDriverOptions, SandboxDriver, SandboxEvent, SandboxInfo, SandboxSpec, WarmInfo, WarmSandboxSpec } from './types.ts';

export const LABELS = {
  slug: 'grove.slug',
  project: 'grove.project',
  instance: 'grove.instance',
  /** Hash of the create options; a container whose hash differs was made from an older spec and is recreated. */
  spec: 'grove.spec',
  /** A warm sandbox's pool id (instead of grove.slug: labels cannot change, so a claimed one keeps it). */
  pool: 'grove.pool',
} as const;

const DEFAULT_SOCKET = '/var/run/docker.sock';
const STOP_TIMEOUT_S = 5;
const DEFAULT_LOG_TAIL = 200;
/** Pause before following the engine's events again after the stream broke. */
const WATCH_RETRY_MS = 1_000;
// Both tmpfs mounts count against the container's memory limit, so they stay small. `exec` is
// explicit because Docker defaults tmpfs to noexec, which breaks compilers and test runners that
// execute from /tmp, and buys nothing while the worktree itself is writable and executable.
const TMPFS_OPTS = 'rw,exec,nosuid,nodev';
const TMPFS = {
  '/tmp': `${TMPFS_OPTS},size=256m,mode=1777`,
  [SANDBOX_PATHS.home]: `${TMPFS_OPTS},size=64m,mode=0755,uid=${SANDBOX_UID},gid=${SANDBOX_GID}`,
};
const INSTANCE_RE = /^[a-z0-9][a-z0-9-]{0,30}$/;
/**
 * Under runsc the host's pids cgroup counts gVisor's own threads (its kernel, and on the ptrace platform a stub per
 * address space and thread), not the agent's processes: about 90 while idle, over 150 for one `git status`. At the
 * agent's own allowance the sandbox's kernel fails to make a thread and the whole sandbox dies, so it gets this many
 * times more (memory still bounds a fork bomb, inside gVisor's kernel).
 */
export const RUNSC_PIDS_FACTOR = 8;

/** Container name for a slug: `grove-<instance>-<project>.<name>` (`~` is not allowed in Docker names). */
export function containerName(instance: string, slug: string): string {
  return `grove-${instance}-${slug.replace('~', '.')}`;
}

/**
 * A warm sandbox's name until it is claimed: `grove-<instance>_warm-<id>`. The `_` appears in no slug's name, so it
 * can never be a workspace's container.
 */
export function warmName(instance: string, pool: string): string {
  return `grove-${instance}_warm-${pool}`;
}

/** The slug a container's name says (`grove-<instance>-<project>.<name>`, with or without Docker's leading `/`), or null. */
export function slugFromName(instance: string, name: string): string | null {
  const prefix = `grove-${instance}-`;
  const bare = name.startsWith('/') ? name.slice(1) : name;
  if (!bare.startsWith(prefix)) return null;
  const slug = bare.slice(prefix.length).replace('.', '~');
  return slugSchema.safeParse(slug).success ? slug : null;
}

export function createDockerDriver(opts: DockerDriverOptions): SandboxDriver {
  if (!INSTANCE_RE.test(opts.instance)) {
    throw new GroveError('invalid_input', `sandbox instance "${opts.instance}" must match ${INSTANCE_RE.source}`);
  }
  const socketPath = opts.socketPath ?? DEFAULT_SOCKET;
  const runtime = parseOrThrow(sandboxRuntimeSchema, opts.runtime ?? 'runc', { what: 'sandbox runtime', code: 'invalid_input' });
  const docker = new Docker({ socketPath });
  const instance = opts.instance;
  const queues = new Map<string, Promise<unknown>>();
  /** Set once the engine has listed the runtime: runtimes change only when dockerd reloads, so one look is enough. */
  let runtimeSeen = runtime === 'runc';

  /** runsc is an entry in the engine's config, not something every engine has: say how to get it. */
  async function checkRuntime(): Promise<void> {
    if (runtimeSeen) return;
    const info = (await call(() => docker.info())) as { Runtimes?: Record<string, unknown> };
    if (!info.Runtimes || !(runtime in info.Runtimes)) {
      throw new GroveError(
        'docker_unavailable',
        `the Docker engine has no "${runtime}" runtime (GROVE_RUNTIME=${runtime}): run \`npm run setup\` as root (installs gVisor's runsc and adds it to /etc/docker/daemon.json), or unset GROVE_RUNTIME to use runc`,
        { details: { socketPath, runtime, runtimes: Object.keys(info.Runtimes ?? {}) } },
      );
    }
    runtimeSeen = true;
  }

  /** Map engine-unreachable errors to docker_unavailable; everything else passes through. */
  async function call<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (e) {
      throw toUnavailable(e, socketPath) ?? e;
    }
  }

  /** Serialise lifecycle calls per container so two ensure()s for one slug never race on create. */
  function serial<T>(name: string, fn: () => Promise<T>): Promise<T> {
    const prev = queues.get(name) ?? Promise.resolve();
    const next = prev.then(fn, fn);
    const tail = next.catch(() => undefined);
    queues.set(name, tail);
    void tail.then(() => {
      if (queues.get(name) === tail) queues.delete(name);
    });
    return next;
  }

  function nameFor(slug: string): string {
    parseOrThrow(slugSchema, slug, { what: 'slug', code: 'invalid_name' });
    return containerName(instance, slug);
  }

  async function inspectRaw(name: string): Promise<ContainerInspectInfo | null> {
    try {
      return await call(() => docker.getContainer(name).inspect());
    } catch (e) {
      if (statusOf(e) === 404) return null;
      throw e;
    }
  }

  async function removeByName(name: string): Promise<void> {
    try {
      await call(() => docker.getContainer(name).remove({ force: true, v: true }));
    } catch (e) {
      // 404: already gone; 409: another remove is in flight, which ends in the same place.
      if (statusOf(e) === 404 || statusOf(e) === 409) return;
      throw e;
    }
  }

  async function imageId(image: string): Promise<string> {
    try {
      const info = await call(() => docker.getImage(image).inspect());
      return info.Id;
    } catch (e) {
      if (statusOf(e) !== 404) throw e;
      throw new GroveError('spawn_failed', `sandbox image "${image}" is not built; run \`npm run setup\` (docker/build-image.sh)`, {
        details: { image },
      });
    }
  }

  async function ensureLocked(spec: SandboxSpec | WarmSandboxSpec, name: string): Promise<SandboxInfo> {
    const body = createOptions(spec, { instance, name, runtime });
    const wantImage = await imageId(spec.image);
    let current = await inspectRaw(name);
    if (current && !reusable(current, body, wantImage)) {
      await removeByName(name);
      current = null;
    }
    if (!current) {
      try {
        await call(() => docker.createContainer(body));
      } catch (e) {
        // 409: the name was taken between inspect and create (another process); use that one.
        if (statusOf(e) !== 409) throw spawnFailed(e, `creating container ${name}`);
      }
      current = await inspectRaw(name);
      if (!current) throw new GroveError('spawn_failed', `container ${name} vanished right after it was created`);
    }
    const container = docker.getContainer(name);
    if (current.State.Paused) await call(() => container.unpause());
    if (!current.State.Running) {
      try {
        await call(() => container.start());
      } catch (e) {
        if (statusOf(e) !== 304) throw spawnFailed(e, `starting container ${name}`);
      }
    }
    const after = await inspectRaw(name);
    if (!after) throw new GroveError('spawn_failed', `container ${name} vanished right after it was started`);
    return toInfo(after, instance);
  }

  return {
    async ping() {
      await call(() => docker.ping());
      await checkRuntime();
    },

    async imageExists(image) {
      try {
        await call(() => docker.getImage(image).inspect());
        return true;
      } catch (e) {
        if (statusOf(e) === 404) return false;
        throw e;
      }
    },

    async ensure(spec) {
      validateSpec(spec);
      const name = nameFor(spec.slug);
      return serial(name, () => ensureLocked(spec, name));
    },

    async inspect(slug) {
      const raw = await inspectRaw(nameFor(slug));
      return raw ? toInfo(raw, instance) : null;
    },

    async stop(slug) {
      const name = nameFor(slug);
      return serial(name, async () => {
        try {
          await call(() => docker.getContainer(name).stop({ t: STOP_TIMEOUT_S }));
        } catch (e) {
          // 304: not running; 404: absent. Both already satisfy "stopped".
          if (statusOf(e) === 304 || statusOf(e) === 404) return;
          throw e;
        }
      });
    },

    async remove(slug) {
      const name = nameFor(slug);
      return serial(name, () => removeByName(name));
    },

    async list() {
      const rows = await call(() => docker.listContainers({ all: true, filters: { label: [`${LABELS.instance}=${instance}`] } }));
      // A workspace's own container, or a warm sandbox a claim renamed to a workspace's name; never an unclaimed one.
      const ours = rows.filter((r) => r.Labels[LABELS.slug] !== undefined || (r.Labels[LABELS.pool] !== undefined && r.Names.some((n) => slugFromName(instance, n) !== null)));
      // Inspect each: the list rows carry neither the exit code nor the OOM flag.
      const infos = await Promise.all(ours.map((r) => inspectRaw(r.Id)));
      return infos.filter((i): i is ContainerInspectInfo => i !== null).map((i) => toInfo(i, instance)).filter((i) => i.slug !== '');
    },

    async ensureWarm(spec) {
      validateWarmSpec(spec);
      const name = warmName(instance, spec.pool);
      return serial(name, () => ensureLocked(spec, name));
    },

    async claimWarm(pool, slug) {
      const from = warmName(instance, parseOrThrow(warmIdSchema, pool, { what: 'warm sandbox id', code: 'invalid_input' }));
      const to = nameFor(slug);
      return serial(from, () =>
        serial(to, async () => {
          const before = await inspectRaw(from);
          if (!before?.State.Running) throw new GroveError('spawn_failed', `the warm sandbox ${pool} is not running`);
          try {
            // A name taken by another container is a 409: the claim fails and the fork starts cold.
            await call(() => docker.getContainer(from).rename({ name: to }));
          } catch (e) {
            throw spawnFailed(e, `renaming the warm sandbox ${pool} to ${to}`);
          }
          const after = await inspectRaw(to);
          if (!after || after.Id !== before.Id) throw new GroveError('spawn_failed', `container ${to} is not the warm sandbox ${pool} after its rename`);
          return toInfo(after, instance);
        }),
      );
    },

    async removeWarm(pool) {
      const name = warmName(instance, parseOrThrow(warmIdSchema, pool, { what: 'warm sandbox id', code: 'invalid_input' }));
      return serial(name, () => removeByName(name));
    },

    async listWarm() {
      const rows = await call(() => docker.listContainers({ all: true, filters: { label: [`${LABELS.instance}=${instance}`, LABELS.pool] } }));
      const out: WarmInfo[] = [];
      for (const r of rows) {
        const pool = r.Labels[LABELS.pool] ?? '';
        if (!warmIdSchema.safeParse(pool).success) continue;
        out.push({ pool, id: r.Id, running: r.State === 'running', claimed: !r.Names.includes(`/${warmName(instance, pool)}`) });
      }
      return out;
    },

    async logs(slug, tail = DEFAULT_LOG_TAIL) {
      const name = nameFor(slug);
      try {
        const buf = await call(() =>
          docker.getContainer(name).logs({ stdout: true, stderr: true, follow: false, tail: Math.max(0, Math.floor(tail)) }),
        );
        return demuxLogs(buf);
      } catch (e) {
        if (statusOf(e) === 404) return '';
        throw e;
      }
    },

    watch(onEvent, onError) {
      let closed = false;
      let stream: NodeJS.ReadableStream | null = null;
      let retry: NodeJS.Timeout | null = null;
      const again = (err: unknown) => {
        stream = null;
        if (closed) return;
        if (err) onError?.(err);
        retry = setTimeout(follow, WATCH_RETRY_MS);
        retry.unref();
      };
      const follow = () => {
        retry = null;
        // The engine filters by label, so only this Grove home's sandboxes are reported.
        const filters = { type: ['container' as const], event: ['die', 'oom'], label: [`${LABELS.instance}=${instance}`] };
        docker.getEvents({ filters }).then(
          (s) => {
            if (closed) {
              (s as unknown as { destroy?: () => void }).destroy?.();
              return;
            }
            stream = s;
            let buf = '';
            s.on('data', (chunk: Buffer) => {
              buf += chunk.toString('utf8');
              let nl: number;
              while ((nl = buf.indexOf('\n')) >= 0) {
                const line = buf.slice(0, nl).trim();
                buf = buf.slice(nl + 1);
                const e = line ? parseEngineEvent(line, instance) : null;
                if (e) onEvent(e);
              }
            });
            s.once('error', (err) => again(err));
            s.once('end', () => again(null));
          },
          (err: unknown) => again(toUnavailable(err, socketPath) ?? err),
        );
      };
      follow();
      return () => {
        closed = true;
        if (retry) clearTimeout(retry);
        (stream as unknown as { destroy?: () => void } | null)?.destroy?.();
      };
    },
  };
}

/**
 * One line of the engine's event stream -> a SandboxEvent, or null for anything else. A claimed warm sandbox has no
 * grove.slug label (labels cannot change): its slug is its name's, given `instance`; an unclaimed one has none.
 */
export function parseEngineEvent(line: string, instance?: string): SandboxEvent | null {
  let raw: { Type?: string; Action?: string; Actor?: { Attributes?: Record<string, string> } };
  try {
    raw = JSON.parse(line) as typeof raw;
  } catch {
    return null;
  }
  if (raw.Type !== 'container') return null;
  const attrs = raw.Actor?.Attributes ?? {};
  const warm = attrs[LABELS.pool] !== undefined && instance !== undefined && attrs.name !== undefined;
  const slug = attrs[LABELS.slug] ?? (warm ? slugFromName(instance, attrs.name ?? '') : null);
  if (!slug || !slugSchema.safeParse(slug).success) return null;
  if (raw.Action === 'oom') return { slug, kind: 'oom', exitCode: null };
  if (raw.Action === 'die') {
    const code = Number(attrs.exitCode);
    return { slug, kind: 'died', exitCode: Number.isInteger(code) ? code : null };
  }
  return null;
}

/** The full create request. Everything security-relevant is here, so the hash label covers it. */
export function createOptions(spec: SandboxSpec | WarmSandboxSpec, ctx: { instance: string; name: string; runtime?: SandboxRuntime }): ContainerCreateOptions {
  const runtime = ctx.runtime ?? 'runc';
  const env: Record<string, string> = {
    ...spec.env,
    HOME: SANDBOX_PATHS.home,
    // The backend starts every agent process as this user (and drops its own capabilities for them).
    GROVE_AGENT_UID: String(SANDBOX_UID),
    GROVE_AGENT_GID: String(SANDBOX_GID),
    // The worktree belongs to uid 1000 but the common dir to the host user; without this git
    // refuses the repository as "dubious ownership".
    GIT_CONFIG_COUNT: '1',
    GIT_CONFIG_KEY_0: 'safe.directory',
    GIT_CONFIG_VALUE_0: '*',
  };
  // Docker orders mounts by destination depth: the empty tmpfs lands on the common dir's worktrees/ (so no
  // sandbox sees another workspace's index, HEAD or reflogs), and the state dir on top of the $HOME tmpfs.
  const mounts: MountSettings[] = [
    bind(spec.worktreePath, SANDBOX_PATHS.workspace, false),
    bind(spec.gitCommonDir, SANDBOX_PATHS.gitCommon, true),
    { Type: 'tmpfs', Source: '', Target: `${SANDBOX_PATHS.gitCommon}/worktrees`, ReadOnly: true, TmpfsOptions: { SizeBytes: 4096, Mode: 0o555 } },
    bind(spec.sandboxGitDir, SANDBOX_PATHS.gitDir, false),
    bind(spec.runDir, SANDBOX_PATHS.run, false),
    bind(spec.threadDir, SANDBOX_PATHS.thread, false),
    bind(spec.stateDir, SANDBOX_PATHS.agentState, false),
    ...(spec.overlay ?? []).map((o) => bind(o.hostPath, `${SANDBOX_PATHS.workspace}/${o.path}`, true)),
  ];
  const body: ContainerCreateOptions = {
    name: ctx.name,
    Image: spec.image,
    // The backend's user, not the agent's: see BACKEND_UID. Everything the agent runs is SANDBOX_UID.
    User: `${BACKEND_UID}:${BACKEND_GID}`,
    WorkingDir: SANDBOX_PATHS.workspace,
    Env: Object.keys(env)
      .sort()
      .map((k) => `${k}=${env[k]}`),
    Labels: {
      // A warm sandbox has no workspace yet: its pool id instead (the same hardening, mounts and limits otherwise).
      ...('pool' in spec ? { [LABELS.pool]: spec.pool } : { [LABELS.slug]: spec.slug }),
      [LABELS.project]: spec.project,
      [LABELS.instance]: ctx.instance,
    },
    HostConfig: {
      NetworkMode: 'none',
      ReadonlyRootfs: true,
      Tmpfs: TMPFS,
      CapDrop: ['ALL'],
      CapAdd: [...SANDBOX_CAPS],
      SecurityOpt: ['no-new-privileges'],
      Privileged: false,
      // tini as PID 1: forwards SIGTERM to the backend and reaps the agent's orphaned children.
      Init: true,
      PidsLimit: runtime === 'runsc' ? spec.limits.pids * RUNSC_PIDS_FACTOR : spec.limits.pids,
      Memory: spec.limits.memoryBytes,
      MemorySwap: spec.limits.memoryBytes,
      NanoCpus: spec.limits.nanoCpus,
      Mounts: mounts,
      // Pinned so logs() works whatever the daemon's default driver is, and bounded on disk.
      LogConfig: { Type: 'json-file', Config: { 'max-size': '5m', 'max-file': '2' } },
      // No RestartPolicy: the host's reconciliation decides what runs.
      // runsc is hashed, so a workspace moved between runtimes gets a new container. runc is set after hashing: a
      // container made before runtimes were a choice (no Runtime, so the engine's default, runc) keeps its hash
      // and is reused rather than recreated on upgrade.
      ...(runtime === 'runc' ? {} : { Runtime: runtime }),
    },
  };
  const hash = createHash('sha256').update(JSON.stringify(body)).digest('hex').slice(0, 16);
  body.Labels = { ...body.Labels, [LABELS.spec]: hash };
  if (body.HostConfig && runtime === 'runc') body.HostConfig.Runtime = 'runc';
  return body;
}

function bind(source: string, target: string, readOnly: boolean): MountSettings {
  // Mounts (not Binds): a missing source is an error instead of a directory silently created as root.
  return { Type: 'bind', Source: source, Target: target, ReadOnly: readOnly, BindOptions: { Propagation: 'rprivate' } };
}

function reusable(current: ContainerInspectInfo, body: ContainerCreateOptions, wantImage: string): boolean {
  if (current.State.Dead || current.State.Status === 'removing') return false;
  if (current.Image !== wantImage) return false;
  return current.Config.Labels?.[LABELS.spec] === body.Labels?.[LABELS.spec];
}

function validateSpec(spec: SandboxSpec): void {
  parseOrThrow(slugSchema, spec.slug, { what: 'slug', code: 'invalid_name' });
  if (parseSlug(spec.slug).project !== spec.project) {
    throw new GroveError('invalid_input', `sandbox spec: project "${spec.project}" does not match slug "${spec.slug}"`);
  }
  validateCommon(spec);
}

function validateWarmSpec(spec: WarmSandboxSpec): void {
  parseOrThrow(warmIdSchema, spec.pool, { what: 'warm sandbox id', code: 'invalid_input' });
  parseOrThrow(projectNameSchema, spec.project, { what: 'project name', code: 'invalid_name' });
  validateCommon(spec);
}

/** What every sandbox's spec must satisfy, warm or not: normalised absolute paths, the git dirs apart, limits, env names. */
function validateCommon(spec: SandboxSpec | WarmSandboxSpec): void {
  const paths = {
    worktreePath: spec.worktreePath,
    sandboxGitDir: spec.sandboxGitDir,
    gitCommonDir: spec.gitCommonDir,
    runDir: spec.runDir,
    threadDir: spec.threadDir,
    stateDir: spec.stateDir,
  };
  for (const [key, p] of Object.entries(paths)) {
    if (!isAbsolute(p) || normalize(p) !== p || (p.length > 1 && p.endsWith('/'))) {
      throw new GroveError('invalid_input', `sandbox spec: ${key} must be a normalised absolute path, got "${p}"`);
    }
  }
  for (const o of spec.overlay ?? []) {
    const problem = overlayPathProblem(o.path, { glob: false });
    if (problem) throw new GroveError('invalid_input', `sandbox spec: overlay path "${o.path}" ${problem}`);
    if (!isAbsolute(o.hostPath) || normalize(o.hostPath) !== o.hostPath) {
      throw new GroveError('invalid_input', `sandbox spec: overlay hostPath must be a normalised absolute path, got "${o.hostPath}"`);
    }
  }
  if (spec.sandboxGitDir === spec.gitCommonDir || spec.sandboxGitDir.startsWith(`${spec.gitCommonDir}/`)) {
    // The common dir's worktrees/ are the host's admin dirs: the agent must not write any of them.
    throw new GroveError('invalid_input', 'sandbox spec: sandboxGitDir must lie outside gitCommonDir');
  }
  const { memoryBytes, nanoCpus, pids } = spec.limits;
  for (const [key, v] of Object.entries({ memoryBytes, nanoCpus, pids })) {
    if (!Number.isSafeInteger(v) || v <= 0) {
      throw new GroveError('invalid_input', `sandbox spec: limits.${key} must be a positive integer, got ${v}`);
    }
  }
  for (const k of Object.keys(spec.env)) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(k)) throw new GroveError('invalid_input', `sandbox spec: bad env name "${k}"`);
  }
}

function toInfo(raw: ContainerInspectInfo, instance: string): SandboxInfo {
  const labels = raw.Config.Labels ?? {};
  const exited = raw.State.Status === 'exited' || raw.State.Status === 'dead';
  // A claimed warm sandbox is the workspace its name says; an unclaimed one is nobody's ('').
  const slug = labels[LABELS.slug] ?? (labels[LABELS.pool] !== undefined ? (slugFromName(instance, raw.Name) ?? '') : '');
  return {
    id: raw.Id,
    slug,
    project: labels[LABELS.project] ?? '',
    running: raw.State.Running,
    exitCode: exited ? raw.State.ExitCode : null,
    oomKilled: raw.State.OOMKilled,
  };
}

/**
 * Docker multiplexes stdout/stderr of non-TTY containers into frames: 1 byte stream id, 3 zero
 * bytes, 4 bytes big-endian length, payload. Anything that doesn't parse as frames is raw text.
 */
export function demuxLogs(buf: Buffer): string {
  const parts: Buffer[] = [];
  let off = 0;
  while (off + 8 <= buf.length) {
    const kind = buf[off];
    if ((kind !== 0 && kind !== 1 && kind !== 2) || buf[off + 1] !== 0 || buf[off + 2] !== 0 || buf[off + 3] !== 0) {
      return buf.toString('utf8');
    }
    const len = buf.readUInt32BE(off + 4);
    parts.push(buf.subarray(off + 8, off + 8 + len));
    off += 8 + len;
  }
  if (off !== buf.length) return buf.toString('utf8');
  return Buffer.concat(parts).toString('utf8');
}

function statusOf(e: unknown): number | undefined {
  if (typeof e !== 'object' || e === null) return undefined;
  const s = (e as { statusCode?: unknown }).statusCode;
  return typeof s === 'number' ? s : undefined;
}

function messageOf(e: unknown): string {
  if (typeof e !== 'object' || e === null) return String(e);
  const json = (e as { json?: { message?: unknown } }).json;
  if (json && typeof json.message === 'string') return json.message;
  return e instanceof Error ? e.message : String(e);
}

function spawnFailed(e: unknown, what: string): unknown {
  if (e instanceof GroveError) return e;
  return new GroveError('spawn_failed', `${what}: ${messageOf(e)}`, { cause: e });
}

const UNREACHABLE = new Set(['ECONNREFUSED', 'ENOENT', 'EACCES', 'EPERM', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT']);

function toUnavailable(e: unknown, socketPath: string): GroveError | null {
  if (e instanceof GroveError) return null;
  const code = typeof e === 'object' && e !== null ? (e as { code?: unknown }).code : undefined;
  if (typeof code !== 'string' || !UNREACHABLE.has(code)) return null;
  const hint =
    code === 'EACCES' || code === 'EPERM'
      ? `permission denied on ${socketPath}: run Grove as root or add the user to the "docker" group`
      : `no Docker engine answers on ${socketPath}: start it with \`npm run setup\` (starts dockerd), \`sudo systemctl start docker\`, or \`sudo dockerd &\``;
  return new GroveError('docker_unavailable', `Docker is unavailable (${code}): ${hint}`, { details: { socketPath }, cause: e });
}
