// Real-Docker tests for the Docker driver: the hardening is checked from inside live containers.
// Needs a running engine and the image from docker/build-image.sh (`npm run setup`). Never sends
// traffic to any non-loopback address.
import { execFileSync, spawnSync } from 'node:child_process';
import { createServer, request } from 'node:http';
import { randomBytes } from 'node:crypto';
import { chmodSync, chownSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isGroveError } from '@grove/contracts';
import { createDockerDriver, containerName, demuxLogs, LABELS, parseEngineEvent, RUNSC_PIDS_FACTOR, slugFromName, warmName } from './docker.ts';
import { agentExecArgs, listCommand, readOnlyMessage, testRuntime } from './test-support.ts';
import { SANDBOX_GID, SANDBOX_PATHS, SANDBOX_UID } from './types.ts';
import type { SandboxEvent, SandboxSpec } from './types.ts';

const IMAGE = process.env.GROVE_SANDBOX_IMAGE ?? 'grove-sandbox:latest';
// `npm test` runs this file a second time with GROVE_TEST_RUNTIME=runsc (gVisor): every check holds on both.
const RUNTIME = testRuntime(process.env.GROVE_TEST_RUNTIME);
const INSTANCE = `t${randomBytes(4).toString('hex')}`;
const OTHER_INSTANCE = `${INSTANCE}x`;
const PROJECT = 'proj';
const LIMITS = { memoryBytes: 256 * 1024 * 1024, nanoCpus: 500_000_000, pids: 128 };

const driver = createDockerDriver({ instance: INSTANCE, runtime: RUNTIME });

/** Host-side fixture mirroring a Grove home: bare primary clone + two worktrees. */
interface Fixture {
  root: string;
  common: string;
  specs: { a: SandboxSpec; b: SandboxSpec };
}
let fx: Fixture;

function git(args: string[], cwd?: string): string {
  return execFileSync('git', ['-c', 'user.name=Grove Test', '-c', 'user.email=test@grove.invalid', ...args], {
    cwd,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  }).trim();
}

function chownTree(path: string): void {
  chownSync(path, SANDBOX_UID, SANDBOX_GID);
  if (!statSync(path).isDirectory()) return;
  for (const entry of readdirSync(path)) chownTree(join(path, entry));
}

function makeFixture(): Fixture {
  if (process.getuid?.() !== 0 && process.getuid?.() !== SANDBOX_UID) {
    throw new Error('these tests must run as root (to hand the fixture to uid 1000) or as uid 1000');
  }
  // Under $HOME on purpose: Grove's default state root is ~/.grove, and for root that means the
  // git dirs are mounted under /root, which the image must let uid 1000 traverse.
  const root = mkdtempSync(join(homedir(), '.grove-sandbox-test-'));
  const common = join(root, 'repos', PROJECT);
  const seed = join(root, 'seed');
  git(['init', '-q', '-b', 'main', seed]);
  writeFileSync(join(seed, 'README.md'), 'hello\n');
  git(['add', 'README.md'], seed);
  git(['commit', '-q', '-m', 'initial'], seed);
  git(['clone', '-q', '--bare', seed, common]);
  rmSync(seed, { recursive: true, force: true });

  const specFor = (name: 'a' | 'b'): SandboxSpec => {
    const slug = `${PROJECT}~${name}`;
    const worktreePath = join(root, 'worktrees', PROJECT, name);
    git(['--git-dir', common, 'worktree', 'add', '-q', '-b', `grove/${name}`, worktreePath, 'main']);
    const spec: SandboxSpec = {
      slug,
      project: PROJECT,
      image: IMAGE,
      worktreePath,
      sandboxGitDir: join(root, 'sandbox-git', slug),
      gitCommonDir: common,
      runDir: join(root, 'run', slug),
      threadDir: join(root, 'threads', slug),
      stateDir: join(root, 'state', slug),
      env: { GROVE_SLUG: slug },
      limits: LIMITS,
    };
    for (const d of [spec.runDir, spec.threadDir, spec.stateDir, spec.sandboxGitDir]) mkdirSync(d, { recursive: true });
    // The run and thread dirs are the backend's (root in the container): the agent's user cannot enter them.
    for (const d of [spec.runDir, spec.threadDir]) chmodSync(d, 0o700);
    // The sandbox's own git dir, as core's sandbox-git.ts lays it out: the host's admin dir is never mounted.
    writeFileSync(join(spec.sandboxGitDir, 'HEAD'), `ref: refs/heads/grove/${name}\n`);
    writeFileSync(join(spec.sandboxGitDir, 'commondir'), `${SANDBOX_PATHS.gitCommon}\n`);
    writeFileSync(join(spec.sandboxGitDir, 'gitdir'), '/workspace/.git\n');
    copyFileSync(join(common, 'worktrees', name, 'index'), join(spec.sandboxGitDir, 'index'));
    return spec;
  };
  const specs = { a: specFor('a'), b: specFor('b') };
  // b gets a config-parity overlay file: kept outside the worktree, mounted read-only onto the empty
  // mount point the host makes in the worktree (docs/git-flow.md).
  const overlayFile = join(root, 'overlays', PROJECT, '.claude', 'settings.local.json');
  mkdirSync(join(overlayFile, '..'), { recursive: true });
  writeFileSync(overlayFile, '{"local":true}\n');
  mkdirSync(join(specs.b.worktreePath, '.claude'));
  writeFileSync(join(specs.b.worktreePath, '.claude', 'settings.local.json'), '');
  specs.b.overlay = [{ hostPath: overlayFile, path: '.claude/settings.local.json' }];
  // The host commits on the workspace branch (DESIGN s8), so grove/a is ahead of main: moving main
  // to HEAD from inside would be a real change, which the read-only common dir must refuse.
  writeFileSync(join(specs.a.worktreePath, 'work.txt'), 'work\n');
  git(['add', 'work.txt'], specs.a.worktreePath);
  git(['commit', '-q', '-m', 'work on a'], specs.a.worktreePath);
  copyFileSync(join(common, 'worktrees', 'a', 'index'), join(specs.a.sandboxGitDir, 'index'));
  for (const s of Object.values(specs)) writeFileSync(join(s.worktreePath, '.git'), `gitdir: ${SANDBOX_PATHS.gitDir}\n`);
  if (process.getuid?.() === 0) {
    for (const s of Object.values(specs)) {
      for (const d of [s.worktreePath, s.sandboxGitDir, s.stateDir]) chownTree(d);
    }
  }
  return { root, common, specs };
}

/** Run a shell command inside a container as the agent does. */
function sh(slug: string, script: string): { code: number; out: string } {
  const r = spawnSync('docker', agentExec(slug, ['sh', '-c', script]), { encoding: 'utf8', timeout: 30_000 });
  return { code: r.status ?? -1, out: `${r.stdout}${r.stderr}` };
}

const agentExec = (slug: string, cmd: string[], o: { detach?: boolean } = {}) => agentExecArgs(containerName(INSTANCE, slug), cmd, { runtime: RUNTIME, ...o });
const list = (dir: string) => listCommand(dir, RUNTIME);
const READ_ONLY = readOnlyMessage(RUNTIME);

/** The backend's pid inside the container, found as the agent would (through /proc). */
function backendPid(slug: string): string {
  const r = sh(slug, 'for p in /proc/[0-9]*; do grep -qs backend.mjs "$p/cmdline" && grep -qs "^Name:.*node" "$p/status" && basename "$p"; done');
  const pid = r.out.trim().split('\n')[0] ?? '';
  if (!/^\d+$/.test(pid)) throw new Error(`no backend process seen from inside ${slug}: ${r.out}`);
  return pid;
}

function dockerInspect(name: string): {
  HostConfig: Record<string, unknown>;
  Mounts: { Type: string; Source: string; Destination: string; RW: boolean }[];
  Config: { Env: string[] };
} {
  return JSON.parse(execFileSync('docker', ['inspect', name], { encoding: 'utf8' }))[0];
}

/** GET over the backend's Unix socket, as the server's proxy does (a socket file, not the network). */
function getOverSocket(socketPath: string, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath, path, method: 'GET' }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** POST JSON over the backend's Unix socket. */
function postOverSocket(socketPath: string, path: string, body: unknown): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const payload = JSON.stringify(body);
    const req = request({ socketPath, path, method: 'POST', headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
    });
    req.on('error', reject);
    req.end(payload);
  });
}

async function waitForHealth(socketPath: string, timeoutMs = 15_000): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const status = await getOverSocket(socketPath, '/health').then(
      (r) => r.status,
      () => 0,
    );
    if (status === 200 || Date.now() > deadline) return status;
    await new Promise((r) => setTimeout(r, 200));
  }
}

function removeLabelled(instance: string): void {
  const ids = execFileSync('docker', ['ps', '-aq', '--filter', `label=${LABELS.instance}=${instance}`], { encoding: 'utf8' })
    .split('\n')
    .filter(Boolean);
  if (ids.length > 0) spawnSync('docker', ['rm', '-f', ...ids]);
}

beforeAll(async () => {
  await driver.ping();
  if (!(await driver.imageExists(IMAGE))) throw new Error(`${IMAGE} is missing: run \`npm run setup\` first`);
  fx = makeFixture();
  await Promise.all([driver.ensure(fx.specs.a), driver.ensure(fx.specs.b)]);
});

afterAll(() => {
  removeLabelled(INSTANCE);
  removeLabelled(OTHER_INSTANCE);
  if (fx) rmSync(fx.root, { recursive: true, force: true });
});

describe('docker driver: hardening, seen from inside the container', () => {
  const a = `${PROJECT}~a`;

  it('runs the agent as an unprivileged user with no capabilities, and the backend with only setuid, setgid and kill', () => {
    expect(sh(a, 'id -u').out.trim()).toBe(String(SANDBOX_UID));
    expect(sh(a, 'grep CapEff /proc/self/status').out).toMatch(/CapEff:\s+0+\s*$/);
    expect(sh(a, 'grep CapPrm /proc/self/status').out).toMatch(/CapPrm:\s+0+\s*$/);
    // gVisor's /proc/<pid>/status has no NoNewPrivs line; runsc sets it from the same OCI spec runc does.
    if (RUNTIME === 'runc') expect(sh(a, 'grep NoNewPrivs /proc/self/status').out).toMatch(/NoNewPrivs:\s+1/);
    const pid = backendPid(a);
    const status = sh(a, `cat /proc/${pid}/status`).out;
    expect(status).toMatch(/^Uid:\s+0\s+0\s+0\s+0/m);
    // CAP_KILL (5), CAP_SETGID (6), CAP_SETUID (7): nothing else, not even in the bounding set.
    expect(status).toMatch(/^CapEff:\s+0+e0\s*$/m);
    expect(status).toMatch(/^CapBnd:\s+0+e0\s*$/m);
    if (RUNTIME === 'runc') expect(status).toMatch(/^NoNewPrivs:\s+1/m);
  });

  it('keeps the backend out of reach of the agent: it cannot signal, trace or read it, nor touch its socket, thread or the host sockets', async () => {
    const pid = backendPid(a);
    const kill = sh(a, `kill -9 ${pid}`);
    expect(kill.code).not.toBe(0);
    expect(kill.out).toMatch(/not permitted/i);
    if (RUNTIME === 'runc') {
      expect(sh(a, `cat /proc/${pid}/environ`).code).not.toBe(0);
    } else {
      // gVisor lets any process read another's environ (docs/security.md): the backend's holds only what the driver
      // put in the container's config, which is never a secret.
      const env = sh(a, `tr '\\0' '\\n' < /proc/${pid}/environ`).out.trim().split('\n');
      const declared = new Set([...dockerInspect(containerName(INSTANCE, a)).Config.Env, 'HOSTNAME', 'PATH']);
      expect(env.length).toBeGreaterThan(3);
      for (const line of env) expect(declared.has(line) || declared.has(line.split('=')[0] ?? ''), line).toBe(true);
    }
    expect(sh(a, `cat /proc/${pid}/mem`).code).not.toBe(0);
    // The run dir (backend.sock, the host's sockets) and the thread dir are root's and 0700.
    for (const attempt of [
      list('/run/grove'),
      'rm -f /run/grove/backend.sock',
      'ln -sf /var/run/docker.sock /run/grove/backend.sock',
      'mv /run/grove /tmp/x',
      'touch /run/grove/x',
      'echo x >> /var/lib/grove/thread/thread.jsonl',
      list('/var/lib/grove/thread'),
    ]) {
      const r = sh(a, attempt);
      expect(r.code, attempt).not.toBe(0);
      expect(r.out, attempt).toMatch(/permission denied|not permitted|busy/i);
    }
    const connect = sh(a, `node -e "require('net').connect('/run/grove/backend.sock').on('connect',()=>{console.log('connected');process.exit(0)}).on('error',e=>{console.log(e.code);process.exit(3)})"`);
    expect(connect.code).toBe(3);
    expect(connect.out).toContain('EACCES');
    // The positive control: the backend is still there and still its own.
    expect(backendPid(a)).toBe(pid);
    expect(await waitForHealth(join(fx.specs.a.runDir, 'backend.sock'))).toBe(200);
  });

  it.runIf(RUNTIME === 'runsc')('runs on gVisor: the kernel the agent talks to is gVisor\'s, not the host\'s', () => {
    const r = sh(a, 'dmesg; uname -r');
    expect(r.code, r.out).toBe(0);
    expect(r.out).toContain('Starting gVisor');
    expect(r.out).not.toContain(execFileSync('uname', ['-r'], { encoding: 'utf8' }).trim());
  });

  it('has a read-only root with writable /tmp, $HOME and the mounted dirs', () => {
    expect(sh(a, 'touch /x').code).not.toBe(0);
    expect(sh(a, 'touch /opt/grove/x').code).not.toBe(0);
    expect(sh(a, 'touch /tmp/x && touch "$HOME/x"').code).toBe(0);
    expect(sh(a, 'echo "$HOME"').out.trim()).toBe('/home/grove');
    expect(sh(a, 'touch /workspace/x /grove/git/x /home/grove/.claude/x').code).toBe(0);
    expect(sh(a, 'touch /grove/common/x').code).not.toBe(0);
  });

  it('binds the agent state dir over the $HOME tmpfs', () => {
    expect(sh(a, 'echo remembered > /home/grove/.claude/session && echo scratch > /home/grove/scratch').code).toBe(0);
    const hostFile = join(fx.specs.a.stateDir, 'session');
    expect(existsSync(hostFile)).toBe(true);
    expect(statSync(hostFile).uid).toBe(SANDBOX_UID);
    // The tmpfs part of $HOME stays in the container.
    expect(existsSync(join(fx.specs.a.stateDir, '..', 'scratch'))).toBe(false);
  });

  it('has no network besides loopback, and nothing of the host on it', () => {
    expect(sh(a, list('/sys/class/net')).out.trim().split(/\s+/)).toEqual(['lo']);
    const routes = sh(a, 'cat /proc/net/route').out.trim().split('\n');
    expect(routes).toHaveLength(1); // the header line only
    const probe = sh(
      a,
      `node -e "const s=require('net').connect(4300,'127.0.0.1');s.on('connect',()=>{console.log('connected');process.exit(0)});s.on('error',e=>{console.log(e.code);process.exit(3)})"`,
    );
    expect(probe.code).toBe(3);
    expect(probe.out).toContain('ECONNREFUSED');
  });

  it('sees neither the Docker socket nor the other workspace', () => {
    // One exec reports on every check, with positive controls in the same script: its own uid, its
    // own worktree file and its own markers are seen and the script runs to the end (exit 42), so an
    // exec that failed, or a container without its mounts, fails here instead of passing as "nothing
    // visible". b's files are looked for by content over the whole filesystem, not only at b's host
    // paths, so a mount of b's dirs anywhere would be seen too.
    const b = fx.specs.b;
    const tag = `grove-marker-${INSTANCE}`;
    // Own markers where the agent may read (its state and git dirs; the run and thread dirs are the backend's);
    // b's in every dir of b's, its host-side admin dir in the common dir included.
    const planted = {
      own: [fx.specs.a.stateDir, fx.specs.a.sandboxGitDir],
      other: [b.worktreePath, b.runDir, b.stateDir, b.threadDir, b.sandboxGitDir, join(fx.common, 'worktrees', 'b')],
    };
    planted.own.forEach((d, i) => writeFileSync(join(d, `marker-a${i}`), `${tag}-a${i}\n`));
    planted.other.forEach((d, i) => writeFileSync(join(d, `marker-b${i}`), `${tag}-b${i}\n`));
    const hidden = ['/var/run/docker.sock', '/run/docker.sock', b.worktreePath, b.runDir, b.stateDir, b.threadDir, b.sandboxGitDir];
    const script = [
      'id -u',
      ...hidden.map((p) => `if [ -e '${p}' ] || [ -L '${p}' ]; then echo 'seen ${p}'; else echo 'absent ${p}'; fi`),
      "test -f /workspace/work.txt && echo 'own worktree'",
      // Every file but /proc, /sys and /dev, as the sandbox user: which markers can it read?
      'set --; for d in /*; do case "$d" in /proc|/sys|/dev) ;; *) set -- "$@" "$d" ;; esac; done',
      `grep -rhoasE -D skip -e '${tag}-[ab][0-9]+' "$@" | sort -u | sed 's/^/found /'`,
      'exit 42',
    ].join('\n');
    const r = sh(a, script);
    try {
      expect(r.code, r.out).toBe(42);
      const lines = r.out.trim().split('\n');
      expect(lines[0]).toBe(String(SANDBOX_UID));
      for (const p of hidden) expect(lines, r.out).toContain(`absent ${p}`);
      expect(lines).toContain('own worktree');
      const found = lines.filter((l) => l.startsWith('found ')).map((l) => l.slice('found '.length));
      expect(found.sort()).toEqual(planted.own.map((_, i) => `${tag}-a${i}`));
    } finally {
      for (const [k, dirs] of Object.entries(planted)) dirs.forEach((d, i) => rmSync(join(d, `marker-${k === 'own' ? 'a' : 'b'}${i}`), { force: true }));
    }
  });

  it('shows overlay files read-only: readable, not writable, not removable; their directory stays writable', () => {
    const b = `${PROJECT}~b`;
    expect(sh(b, 'cat /workspace/.claude/settings.local.json').out).toBe('{"local":true}\n');
    const write = sh(b, 'echo changed > /workspace/.claude/settings.local.json');
    expect(write.code).not.toBe(0);
    expect(write.out).toMatch(READ_ONLY);
    expect(sh(b, 'rm -f /workspace/.claude/settings.local.json').code).not.toBe(0);
    expect(sh(b, 'mv /workspace/.claude/settings.local.json /workspace/x').code).not.toBe(0);
    expect(sh(b, 'touch /workspace/.claude/other.json').code).toBe(0);
    expect(readFileSync(fx.specs.b.overlay?.[0]?.hostPath ?? '', 'utf8')).toBe('{"local":true}\n');
  });

  it('refuses an overlay entry that names git plumbing or is not a plain relative path', async () => {
    for (const path of ['.git/config', '../escape', '/etc/passwd', '.gitattributes']) {
      const spec = { ...fx.specs.a, slug: `${PROJECT}~bad`, overlay: [{ hostPath: fx.specs.b.overlay?.[0]?.hostPath ?? '', path }] };
      await expect(driver.ensure(spec)).rejects.toMatchObject({ code: 'invalid_input' });
    }
  });

  it('lets git read the worktree but not write refs or objects', () => {
    const mainBefore = git(['--git-dir', fx.common, 'rev-parse', 'refs/heads/main']);
    const status = sh(a, 'cd /workspace && git status --porcelain=v1 --branch');
    expect(status.code, status.out).toBe(0);
    expect(status.out).toContain('## grove/a');
    expect(sh(a, 'cd /workspace && git log --oneline -1').out).toContain('work on a');
    // The sandbox's index (seeded from the checkout's) agrees with HEAD: no tracked file shows as changed.
    expect(status.out).not.toMatch(/^(?!\?\? )(?!## ).+$/m);

    const update = sh(a, 'cd /workspace && git update-ref refs/heads/main HEAD');
    expect(update.code).not.toBe(0);
    expect(update.out).toMatch(READ_ONLY);
    expect(git(['--git-dir', fx.common, 'rev-parse', 'refs/heads/main'])).toBe(mainBefore);

    const add = sh(a, 'cd /workspace && echo new > new.txt && git add new.txt');
    expect(add.code).not.toBe(0);
    expect(add.out).toMatch(READ_ONLY);
    // Whatever the words, nothing reached the project's object store.
    const blob = execFileSync('git', ['hash-object', '--stdin'], { input: 'new\n', encoding: 'utf8' }).trim();
    expect(spawnSync('git', ['--git-dir', fx.common, 'cat-file', '-e', blob]).status).not.toBe(0);
    sh(a, 'rm -f /workspace/new.txt');
  });

  it('hides every admin dir of the project, its own included: host git never reads what the agent writes', () => {
    // Through the common dir the agent sees no worktree admin dir (index, HEAD, reflogs of any workspace).
    const listed = sh(a, `${list('/grove/common/worktrees')}; echo "[$?]"`);
    expect(listed.out.trim()).toBe('[0]');
    expect(sh(a, 'mkdir /grove/common/worktrees/x').code).not.toBe(0);
    expect(readdirSync(join(fx.common, 'worktrees')).sort()).toEqual(['a', 'b']);
    // The attack: replace the HEAD of the git dir /workspace/.git names with a FIFO. It lands in the sandbox's
    // own git dir, so the host's `git worktree list` (which reads every admin dir's HEAD) does not block on it.
    const fifo = sh(a, 'd=$(sed -n "s/^gitdir: //p" /workspace/.git) && rm -f "$d/HEAD" && mkfifo "$d/HEAD" && test -p "$d/HEAD" && echo planted');
    expect(fifo.out).toContain('planted');
    try {
      const listed = spawnSync('git', ['--git-dir', fx.common, 'worktree', 'list', '--porcelain'], { encoding: 'utf8', timeout: 10_000 });
      expect(listed.error).toBeUndefined();
      expect(listed.status).toBe(0);
      expect(listed.stdout).toContain('branch refs/heads/grove/a');
      for (const id of ['a', 'b']) expect(statSync(join(fx.common, 'worktrees', id, 'HEAD')).isFile()).toBe(true);
    } finally {
      sh(a, 'd=$(sed -n "s/^gitdir: //p" /workspace/.git) && rm -f "$d/HEAD" && echo "ref: refs/heads/grove/a" > "$d/HEAD"');
    }
  });

  it('carries the hardening and the limits in its HostConfig', () => {
    const info = dockerInspect(containerName(INSTANCE, a));
    const hc = info.HostConfig;
    expect(hc.NetworkMode).toBe('none');
    expect(hc.ReadonlyRootfs).toBe(true);
    expect(hc.CapDrop).toEqual(['ALL']);
    expect(hc.CapAdd).toEqual(['SETUID', 'SETGID', 'KILL']);
    expect(hc.SecurityOpt).toEqual(['no-new-privileges']);
    expect(hc.Privileged).toBe(false);
    expect(hc.Memory).toBe(LIMITS.memoryBytes);
    expect(hc.MemorySwap).toBe(LIMITS.memoryBytes);
    expect(hc.NanoCpus).toBe(LIMITS.nanoCpus);
    expect(hc.PidsLimit).toBe(RUNTIME === 'runc' ? LIMITS.pids : LIMITS.pids * RUNSC_PIDS_FACTOR);
    expect(hc.Runtime).toBe(RUNTIME);
    expect(hc.RestartPolicy).toMatchObject({ Name: expect.stringMatching(/^(no)?$/) });
    expect(Object.keys(hc.Tmpfs as object).sort()).toEqual(['/home/grove', '/tmp']);
    const mounts = Object.fromEntries(info.Mounts.map((m) => [m.Destination, m]));
    const s = fx.specs.a;
    expect(Object.keys(mounts).sort()).toEqual(
      ['/workspace', '/grove/git', '/grove/common', '/grove/common/worktrees', '/run/grove', '/var/lib/grove/thread', '/home/grove/.claude'].sort(),
    );
    expect(mounts['/grove/common']).toMatchObject({ Source: s.gitCommonDir, RW: false });
    expect(mounts['/grove/common/worktrees']).toMatchObject({ Type: 'tmpfs', RW: false });
    expect(mounts['/grove/git']).toMatchObject({ Source: s.sandboxGitDir, RW: true });
    expect(info.Mounts.some((m) => m.Source.includes('docker.sock') || m.Source.includes(join(s.gitCommonDir, 'worktrees')))).toBe(false);
    expect(info.Config.Env).toEqual(
      expect.arrayContaining(['HOME=/home/grove', 'GIT_CONFIG_KEY_0=safe.directory', `GROVE_SLUG=${a}`, `GROVE_AGENT_UID=${SANDBOX_UID}`, `GROVE_AGENT_GID=${SANDBOX_GID}`]),
    );
  });
});

describe('docker driver: lifecycle', () => {
  it('runs the real backend, reachable over the socket in the host run dir', async () => {
    expect(await waitForHealth(join(fx.specs.a.runDir, 'backend.sock'))).toBe(200);
    expect(await driver.logs('proj~a', 50)).toContain('backend listening');
  });

  it("writes what the agent's tools make as the agent's user, and the thread as the backend's", async () => {
    const socketPath = join(fx.specs.a.runDir, 'backend.sock');
    expect(await waitForHealth(socketPath)).toBe(200);
    const posted = await postOverSocket(socketPath, '/messages', { text: 'write made/by-agent.txt hello' });
    expect(posted.status).toBe(202);
    const file = join(fx.specs.a.worktreePath, 'made', 'by-agent.txt');
    const deadline = Date.now() + 15_000;
    // The file can exist before its content is written (the agent's child creates, then writes): wait for both.
    const content = () => (existsSync(file) ? readFileSync(file, 'utf8') : null);
    while (content() !== 'hello' && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    expect(content()).toBe('hello');
    for (const p of [file, join(fx.specs.a.worktreePath, 'made')]) expect(statSync(p)).toMatchObject({ uid: SANDBOX_UID, gid: SANDBOX_GID });
    const thread = statSync(join(fx.specs.a.threadDir, 'thread.jsonl'));
    expect(thread.uid).toBe(0);
    expect(statSync(socketPath)).toMatchObject({ uid: 0, mode: expect.any(Number) as number });
    expect(statSync(socketPath).mode & 0o777).toBe(0o600);
  });

  it('ensure() is idempotent and reports the running container', async () => {
    const first = await driver.ensure(fx.specs.a);
    const second = await driver.ensure(fx.specs.a);
    expect(second.id).toBe(first.id);
    expect(second).toMatchObject({ slug: 'proj~a', project: PROJECT, running: true, exitCode: null, oomKilled: false });
    expect((await driver.inspect('proj~a'))?.id).toBe(first.id);
  });

  it('stop() keeps the container and ensure() starts the same one again', async () => {
    const before = await driver.ensure(fx.specs.b);
    await driver.stop('proj~b');
    const stopped = await driver.inspect('proj~b');
    expect(stopped).toMatchObject({ id: before.id, running: false });
    expect(stopped?.exitCode).not.toBeNull();
    await driver.stop('proj~b'); // already stopped: no error
    const again = await driver.ensure(fx.specs.b);
    expect(again).toMatchObject({ id: before.id, running: true });
  });

  it('watch() reports a sandbox killed from outside and a process killed at the memory limit, and only this instance', async () => {
    await driver.ensure(fx.specs.b);
    const seen: SandboxEvent[] = [];
    const other: SandboxEvent[] = [];
    const stop = driver.watch((e) => seen.push(e));
    const stopOther = createDockerDriver({ instance: OTHER_INSTANCE }).watch((e) => other.push(e));
    try {
      await new Promise((r) => setTimeout(r, 300)); // the engine has the subscription
      const hogCmd = ['node', '-e', 'const a=[];for(;;)a.push(Buffer.alloc(16<<20,1))'];
      if (RUNTIME === 'runc') {
        // A memory hog inside A: the kernel kills it at the 256 MiB limit; the backend lives on.
        const hog = spawnSync('docker', agentExec('proj~a', hogCmd));
        expect(hog.status).toBe(137);
      } else {
        // Under gVisor the limit bounds the whole sandbox (its kernel included): the host kills all of it, and an
        // attached exec would hang on the dead sandbox, so the hog runs detached.
        execFileSync('docker', agentExec('proj~a', hogCmd, { detach: true }));
      }
      execFileSync('docker', ['kill', '--signal', 'KILL', containerName(INSTANCE, 'proj~b')]);
      const deadline = Date.now() + 20_000;
      const diedA = () => RUNTIME === 'runc' || seen.some((e) => e.kind === 'died' && e.slug === 'proj~a');
      while (!(seen.some((e) => e.kind === 'died' && e.slug === 'proj~b') && seen.some((e) => e.kind === 'oom') && diedA()) && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 50));
      }
      expect(seen).toContainEqual({ slug: 'proj~b', kind: 'died', exitCode: 137 });
      expect(seen).toContainEqual({ slug: 'proj~a', kind: 'oom', exitCode: null });
      expect(other).toEqual([]);
      if (RUNTIME === 'runc') {
        expect((await driver.inspect('proj~a'))?.running).toBe(true);
      } else {
        expect(seen).toContainEqual({ slug: 'proj~a', kind: 'died', exitCode: 137 });
        expect(await driver.inspect('proj~a')).toMatchObject({ running: false, oomKilled: true, exitCode: 137 });
      }
    } finally {
      stop();
      stopOther();
    }
    await driver.ensure(fx.specs.a);
    await driver.ensure(fx.specs.b);
  });

  it('ensure() recreates a container made from a different spec', async () => {
    const before = await driver.ensure(fx.specs.b);
    const changed = { ...fx.specs.b, env: { ...fx.specs.b.env, EXTRA: '1' } };
    const after = await driver.ensure(changed);
    expect(after.id).not.toBe(before.id);
    expect(after.running).toBe(true);
    expect(dockerInspect(containerName(INSTANCE, 'proj~b')).Config.Env).toContain('EXTRA=1');
  });

  it('list() returns only this instance', async () => {
    // A foreign Grove's container (never started) must not show up.
    execFileSync('docker', [
      'create',
      '--name', `grove-${OTHER_INSTANCE}-proj`,
      '--label', `${LABELS.instance}=${OTHER_INSTANCE}`,
      '--label', `${LABELS.slug}=proj`,
      '--label', `${LABELS.project}=proj`,
      '--network', 'none',
      IMAGE,
    ]);
    const slugs = (await driver.list()).map((i) => i.slug).sort();
    expect(slugs).toEqual(['proj~a', 'proj~b']);
  });

  it('logs() honours tail, and returns nothing for an absent container', async () => {
    expect((await driver.logs('proj~a', 1)).trim().split('\n')).toHaveLength(1);
    expect(await driver.logs('proj~nope')).toBe('');
  });

  it('remove() removes, and is quiet when absent', async () => {
    await driver.remove('proj~b');
    expect(await driver.inspect('proj~b')).toBeNull();
    await driver.remove('proj~b');
    await driver.stop('proj~b');
    expect((await driver.list()).map((i) => i.slug)).toEqual(['proj~a']);
  });

  it('fails clearly for a missing image', async () => {
    const err = await driver.ensure({ ...fx.specs.b, image: `grove-missing-${INSTANCE}:none` }).catch((e: unknown) => e);
    expect(isGroveError(err) && err.code).toBe('spawn_failed');
    expect(await driver.inspect('proj~b')).toBeNull();
  });

  it('rejects specs outside the rules before touching Docker', async () => {
    const bad = await driver.ensure({ ...fx.specs.a, slug: '../x' }).catch((e: unknown) => e);
    expect(isGroveError(bad) && bad.code).toBe('invalid_name');
    const rel = await driver.ensure({ ...fx.specs.a, runDir: 'run/x' }).catch((e: unknown) => e);
    expect(isGroveError(rel) && rel.code).toBe('invalid_input');
  });
});

describe('docker driver: engine unavailable', () => {
  it('maps a dead socket to docker_unavailable with a hint', async () => {
    const dead = createDockerDriver({ instance: INSTANCE, socketPath: join(fx.root, 'no-such.sock') });
    const err = await dead.ping().catch((e: unknown) => e);
    expect(isGroveError(err) && err.code).toBe('docker_unavailable');
    expect((err as Error).message).toMatch(/start it/);
  });
});

describe('docker driver: the runtime it is asked for', () => {
  it('pings clean only when the engine lists the runtime, and says how to get runsc when it does not', async () => {
    // An engine that answers like dockerd without a runsc entry (GET /_ping, GET /info); the real engine has it.
    const sock = join(fx.root, 'fake-engine.sock');
    const engine = createServer((req, res) => {
      if (req.url?.endsWith('/_ping')) return void res.end('OK');
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ Runtimes: { runc: { path: 'runc' } } }));
    });
    await new Promise<void>((r) => engine.listen(sock, r));
    try {
      await createDockerDriver({ instance: INSTANCE, socketPath: sock }).ping();
      const err = await createDockerDriver({ instance: INSTANCE, socketPath: sock, runtime: 'runsc' }).ping().catch((e: unknown) => e);
      expect(isGroveError(err) && err.code).toBe('docker_unavailable');
      expect((err as Error).message).toMatch(/no "runsc" runtime.*npm run setup/);
    } finally {
      await new Promise((r) => engine.close(r));
    }
    // The real engine: runsc is there (scripts/setup.sh), so a runsc driver pings clean.
    await createDockerDriver({ instance: INSTANCE, runtime: 'runsc' }).ping();
  });

  it('refuses a runtime it does not know before touching Docker', () => {
    expect(() => createDockerDriver({ instance: INSTANCE, runtime: 'kata' as 'runc' })).toThrow(/runtime/);
  });
});

describe('demuxLogs', () => {
  const frame = (kind: number, text: string): Buffer => {
    const body = Buffer.from(text);
    const head = Buffer.alloc(8);
    head[0] = kind;
    head.writeUInt32BE(body.length, 4);
    return Buffer.concat([head, body]);
  };

  it('joins stdout and stderr frames in order', () => {
    expect(demuxLogs(Buffer.concat([frame(1, 'out\n'), frame(2, 'err\n'), frame(1, 'more')]))).toBe('out\nerr\nmore');
  });

  it('reads only container die and oom events that carry a valid slug', () => {
    const ev = (o: object) => JSON.stringify({ Type: 'container', ...o });
    expect(parseEngineEvent(ev({ Action: 'die', Actor: { Attributes: { [LABELS.slug]: 'p~a', exitCode: '137' } } }))).toEqual({ slug: 'p~a', kind: 'died', exitCode: 137 });
    expect(parseEngineEvent(ev({ Action: 'oom', Actor: { Attributes: { [LABELS.slug]: 'p~a' } } }))).toEqual({ slug: 'p~a', kind: 'oom', exitCode: null });
    expect(parseEngineEvent(ev({ Action: 'start', Actor: { Attributes: { [LABELS.slug]: 'p~a' } } }))).toBeNull();
    expect(parseEngineEvent(ev({ Action: 'die', Actor: { Attributes: { [LABELS.slug]: '../etc' } } }))).toBeNull();
    expect(parseEngineEvent(JSON.stringify({ Type: 'network', Action: 'die' }))).toBeNull();
    expect(parseEngineEvent('not json')).toBeNull();
  });

  it('reports a claimed warm sandbox by its name, an unclaimed one not at all', () => {
    const ev = (attrs: Record<string, string>) => JSON.stringify({ Type: 'container', Action: 'die', Actor: { Attributes: { exitCode: '1', ...attrs } } });
    expect(parseEngineEvent(ev({ [LABELS.pool]: '0123456789ab', name: containerName('abc', 'p~a') }), 'abc')).toEqual({ slug: 'p~a', kind: 'died', exitCode: 1 });
    expect(parseEngineEvent(ev({ [LABELS.pool]: '0123456789ab', name: warmName('abc', '0123456789ab') }), 'abc')).toBeNull();
    // Another home's name, or no instance to read it with: nobody's.
    expect(parseEngineEvent(ev({ [LABELS.pool]: '0123456789ab', name: containerName('other', 'p~a') }), 'abc')).toBeNull();
    expect(parseEngineEvent(ev({ [LABELS.pool]: '0123456789ab', name: containerName('abc', 'p~a') }))).toBeNull();
    // A name never stands in for a slug label on an ordinary container.
    expect(parseEngineEvent(ev({ name: containerName('abc', 'p~a') }), 'abc')).toBeNull();
  });

  it('reads slugs back from container names and never from a warm one', () => {
    expect(slugFromName('abc', `/${containerName('abc', 'p~a')}`)).toBe('p~a');
    expect(slugFromName('abc', containerName('abc', 'p'))).toBe('p');
    expect(slugFromName('abc', warmName('abc', '0123456789ab'))).toBeNull();
    expect(slugFromName('abc', 'grove-abc-../etc')).toBeNull();
    expect(slugFromName('abc', 'grove-abcd-p.a')).toBeNull();
  });

  it('passes raw (TTY) output through', () => {
    expect(demuxLogs(Buffer.from('plain text log\n'))).toBe('plain text log\n');
    expect(demuxLogs(Buffer.alloc(0))).toBe('');
  });
});
