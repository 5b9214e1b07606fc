// A project whose remote is served over ssh by a local sshd (Debian's openssh-server, on 127.0.0.1 with throwaway
// host and client keys; ~/.ssh is never read or written): clone, fork, checkpoint and publish push over ssh, and
// an unknown host key or a wrong client key is refused as remote_failed (auth), leaving nothing behind.
import { spawn, spawnSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createTestGrove } from './test-support/test-grove.ts';
import type { Grove } from './index.ts';
import { FakeDriver } from './test-support/fake-driver.ts';
import { git, makeSourceRepo } from './test-support/repo.ts';
import { startTestForge } from './test-support/test-forge.ts';
import type { TestForge } from './test-support/test-forge.ts';

const SSHD = '/usr/sbin/sshd';
const TOKEN = 'sshd-test-forge-token';

let tmp: string;
let upstream: string;
let port: number;
let sshd: ChildProcess | null = null;
let sshdLog = '';
const user = userInfo().username;

function keygen(file: string): void {
  const r = spawnSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'grove-test', '-f', file], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`ssh-keygen failed: ${r.stderr}`);
}

function freePort(): Promise<number> {
  return new Promise((resolvePromise, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const addr = s.address();
      s.close(() => (typeof addr === 'object' && addr ? resolvePromise(addr.port) : reject(new Error('no port'))));
    });
  });
}

/** Resolves once sshd accepts connections (its banner arrives), rejects once it has exited. */
async function waitForSshd(): Promise<void> {
  for (;;) {
    if (sshd?.exitCode !== null) throw new Error(`sshd exited: ${sshdLog}`);
    const banner = await new Promise<boolean>((resolvePromise) => {
      const s = connect(port, '127.0.0.1');
      s.once('data', (b: Buffer) => {
        s.destroy();
        resolvePromise(b.toString('utf8').startsWith('SSH-'));
      });
      s.once('error', () => resolvePromise(false));
    });
    if (banner) return;
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The ssh a server would be configured with (GROVE_GIT_SSH_COMMAND): this key, this known_hosts, no ~/.ssh. */
function sshCommand(key: string, knownHosts: string): string {
  return `ssh -F /dev/null -i ${key} -o IdentitiesOnly=yes -o UserKnownHostsFile=${knownHosts} -o GlobalKnownHostsFile=/dev/null`;
}

beforeAll(async () => {
  if (!existsSync(SSHD)) throw new Error(`${SSHD} is missing: run scripts/setup.sh --with-browser (installs openssh-server)`);
  tmp = mkdtempSync(join(tmpdir(), 'grove-sshd-'));
  makeSourceRepo(join(tmp, 'src'));
  upstream = join(tmp, 'upstream.git');
  git(tmp, 'clone', '-q', '--bare', join(tmp, 'src'), upstream);
  for (const k of ['host_key', 'client_key', 'wrong_key', 'other_host_key']) keygen(join(tmp, k));
  writeFileSync(join(tmp, 'authorized_keys'), readFileSync(join(tmp, 'client_key.pub')));
  port = await freePort();
  writeFileSync(join(tmp, 'known_hosts'), `[127.0.0.1]:${port} ${readFileSync(join(tmp, 'host_key.pub'), 'utf8')}`);
  // The right host but another key for it: what a man in the middle would present.
  writeFileSync(join(tmp, 'wrong_known_hosts'), `[127.0.0.1]:${port} ${readFileSync(join(tmp, 'other_host_key.pub'), 'utf8')}`);
  writeFileSync(
    join(tmp, 'sshd_config'),
    [
      `Port ${port}`,
      'ListenAddress 127.0.0.1',
      `HostKey ${join(tmp, 'host_key')}`,
      `AuthorizedKeysFile ${join(tmp, 'authorized_keys')}`,
      `AllowUsers ${user}`,
      `PidFile ${join(tmp, 'sshd.pid')}`,
      'PubkeyAuthentication yes',
      'PasswordAuthentication no',
      'KbdInteractiveAuthentication no',
      'PermitRootLogin prohibit-password',
      'UsePAM no',
      // The temp dir is world-readable /tmp; the keys are throwaway.
      'StrictModes no',
      '',
    ].join('\n'),
  );
  // sshd (as root) wants its privilege-separation directory; Debian's service would make it.
  if (process.getuid?.() === 0) mkdirSync('/run/sshd', { recursive: true, mode: 0o755 });
  sshd = spawn(SSHD, ['-D', '-e', '-f', join(tmp, 'sshd_config')], { stdio: ['ignore', 'ignore', 'pipe'] });
  sshd.stderr?.on('data', (b: Buffer) => (sshdLog += b.toString('utf8')));
  await waitForSshd();
});

afterAll(async () => {
  if (sshd && sshd.exitCode === null) {
    const exited = new Promise((r) => sshd?.once('exit', r));
    sshd.kill('SIGTERM');
    await exited;
  }
  rmSync(tmp, { recursive: true, force: true });
});

let home: string;
let driver: FakeDriver;
let grove: Grove | null = null;
let forge: TestForge | null = null;

afterEach(async () => {
  await grove?.close();
  grove = null;
  await driver.closeAll();
  await forge?.close();
  forge = null;
  rmSync(home, { recursive: true, force: true });
});

async function open(gitSshCommand: string): Promise<Grove> {
  home = mkdtempSync(join(tmp, 'home-'));
  driver = new FakeDriver();
  grove = await createTestGrove({ home, driver, image: 'grove-sandbox:test', maxRunning: 4, logger: pino({ level: 'silent' }), healthTimeoutMs: 1_500, gitLockTimeoutMs: 5_000, forgeToken: TOKEN, gitSshCommand });
  return grove;
}

const url = () => `ssh://${user}@127.0.0.1:${port}${upstream}`;

describe('a remote over ssh (local sshd)', () => {
  it('clones, forks, and publishes: the checkpoint is pushed over ssh to the bare repository', async () => {
    const g = await open(sshCommand(join(tmp, 'client_key'), join(tmp, 'known_hosts')));
    const project = await g.addProject({ name: 'demo', source: url(), createDefault: false, failIfExists: true });
    expect(project.defaultBranch).toBe('main');
    forge = await startTestForge({ bare: upstream, owner: 'team', repo: 'demo', token: TOKEN });
    await g.setProjectConfig('demo', { forge: { kind: 'gitea', baseUrl: forge.baseUrl, owner: 'team', repo: 'demo' } });

    // A commit pushed upstream since the clone: the fetch before the fork (over ssh) brings it.
    const other = join(tmp, `other-${Date.now()}`);
    git(tmp, 'clone', '-q', upstream, other);
    writeFileSync(join(other, 'upstream.txt'), 'new upstream\n');
    git(other, 'add', '.');
    git(other, 'commit', '-q', '-m', 'upstream work');
    git(other, 'push', '-q', 'origin', 'main');

    await g.fork({ project: 'demo', name: 'w' });
    const wt = join(home, 'worktrees', 'demo', 'w');
    expect(readFileSync(join(wt, 'app.txt'), 'utf8')).toBe('v1\n');
    expect(readFileSync(join(wt, 'upstream.txt'), 'utf8')).toBe('new upstream\n');

    writeFileSync(join(wt, 'feature.md'), '# over ssh\n');
    const out = await g.publish('demo~w', { title: 'Over ssh' });
    expect(out.checkpoint.files).toEqual(['feature.md']);
    expect(git(upstream, 'rev-parse', 'refs/heads/grove/w')).toBe(out.checkpoint.commit);
    expect(git(upstream, 'show', 'refs/heads/grove/w:feature.md')).toBe('# over ssh');
    expect(forge.pulls).toMatchObject([{ head: 'grove/w', base: 'main' }]);
    git(upstream, 'fsck', '--strict');
  });

  it('refuses an unknown host key as remote_failed (auth) and leaves nothing behind', async () => {
    const g = await open(sshCommand(join(tmp, 'client_key'), join(tmp, 'wrong_known_hosts')));
    const err = await g.addProject({ name: 'demo', source: url(), createDefault: false }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'remote_failed', status: 502, details: { op: 'clone', reason: 'auth' } });
    expect((err as Error).message).toMatch(/refused this host's credentials/);
    expect(readdirSync(join(home, 'repos'))).toEqual([]);
    expect(await g.listProjects()).toEqual([]);
  });

  it('refuses a key the server does not know as remote_failed (auth) and leaves nothing behind', async () => {
    const g = await open(sshCommand(join(tmp, 'wrong_key'), join(tmp, 'known_hosts')));
    await expect(g.addProject({ name: 'demo', source: url(), createDefault: false })).rejects.toMatchObject({
      code: 'remote_failed',
      details: { op: 'clone', reason: 'auth' },
    });
    expect(readdirSync(join(home, 'repos'))).toEqual([]);
    expect(await g.listProjects()).toEqual([]);
  });

  it('takes only an ssh program as the ssh command', async () => {
    for (const bad of ['sh -c "touch /tmp/x"', 'ssh\n-o ProxyCommand=x', '', '/tmp/evil']) {
      home = mkdtempSync(join(tmp, 'home-'));
      await expect(createTestGrove({ home, driver: new FakeDriver(), image: 'grove-sandbox:test', maxRunning: 1, logger: pino({ level: 'silent' }), gitSshCommand: bad })).rejects.toMatchObject({ code: 'invalid_input' });
      rmSync(home, { recursive: true, force: true });
    }
    driver = new FakeDriver();
    home = mkdtempSync(join(tmp, 'home-'));
  });
});
