// Teardown never loses work, against the real stack: uncommitted, staged and untracked files are saved to a
// recovery ref before the worktree goes, come back byte for byte through restore, survive a SIGKILL between
// saving and removing, and no branch with commits is ever deleted.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import type { GroveEvent, Workspace } from '@grove/contracts';
import { gitInWorktree } from '../packages/core/src/test-support/repo.ts';
import { containerOf, dockerExec, git, useServer } from './harness.ts';

const fx = useServer('saved');
const { home } = fx;
const repo = path.join(home, 'repos', 'demo');
const worktree = (name: string) => path.join(home, 'worktrees', 'demo', name);

async function fork(name: string): Promise<Workspace> {
  const r = await fx.s.api<{ workspace: Workspace }>('POST', '/api/workspaces', { project: 'demo', name });
  expect(r.status).toBe(201);
  return r.body.workspace;
}

async function events(slug: string): Promise<GroveEvent[]> {
  return (await fx.s.api<{ events: GroveEvent[] }>('GET', `/api/events?slug=${slug}&limit=1000`)).body.events;
}

/**
 * Changes of every kind: written inside the sandbox as its user (a modified tracked file, an untracked binary
 * file, a deleted file, an ignored file) and staged on the host (the sandbox cannot write objects). Returns
 * what the restored worktree must hold (null: must not exist).
 */
function makeChanges(slug: string, name: string): Record<string, Buffer | null> {
  const container = containerOf(fx.s.instance, slug) ?? '';
  const script = [
    "printf '# changed inside the sandbox\\n' > README.md",
    'mkdir -p notes/deep',
    "printf '\\000\\001\\002\\377\\376binary\\n' > notes/deep/data.bin",
    "printf 'dist/\\n' > .gitignore",
    "mkdir -p dist && printf 'built' > dist/out.js",
    'chmod 755 README.md',
  ].join(' && ');
  // package.json is a tracked file of the demo project; deleting it is a change too.
  expect(gitInWorktree(worktree(name), 'ls-files', 'package.json')).toBe('package.json');
  const w = dockerExec(container, ['sh', '-c', `cd /workspace && ${script} && rm package.json`]);
  expect(w.code, w.out).toBe(0);
  fs.writeFileSync(path.join(worktree(name), 'staged.txt'), 'staged on the host\n');
  gitInWorktree(worktree(name), 'add', 'staged.txt');
  return {
    'README.md': Buffer.from('# changed inside the sandbox\n'),
    'notes/deep/data.bin': Buffer.from([0, 1, 2, 255, 254, ...Buffer.from('binary\n')]),
    '.gitignore': Buffer.from('dist/\n'),
    'staged.txt': Buffer.from('staged on the host\n'),
    'dist/out.js': null,
    'package.json': null,
  };
}

function expectRestored(name: string, files: Record<string, Buffer | null>): void {
  for (const [f, content] of Object.entries(files)) {
    const p = path.join(worktree(name), f);
    if (content === null) expect(fs.existsSync(p), f).toBe(false);
    else expect(fs.readFileSync(p).equals(content), f).toBe(true);
  }
  expect(fs.statSync(path.join(worktree(name), 'README.md')).mode & 0o111).not.toBe(0);
}

describe('teardown never loses work', () => {
  it('saves uncommitted, staged and untracked files before removing the worktree; restore brings them back byte for byte', async () => {
    const ws = await fork('keep');
    const tip = git(repo, 'rev-parse', 'refs/heads/grove/keep');
    const files = makeChanges(ws.slug, 'keep');

    const gone = await fx.s.api<{ workspace: Workspace }>('DELETE', `/api/workspaces/${ws.slug}`);
    expect(gone.body.workspace.state).toBe('gone');
    expect(fs.existsSync(worktree('keep'))).toBe(false);
    const ev = await events(ws.slug);
    const cleaned = ev.find((e) => e.type === 'workspace.cleaned');
    expect(cleaned?.data.recoveryRef).toBe('refs/grove/demo+keep/teardown/1');
    expect(ev.find((e) => e.type === 'workspace.saved')?.data).toMatchObject({ reason: 'teardown', ref: 'refs/grove/demo+keep/teardown/1' });
    expect(git(repo, 'rev-parse', 'refs/heads/grove/keep')).toBe(tip);

    const saved = await fx.s.api<{ saved: Array<{ ref: string; n: number }> }>('GET', `/api/workspaces/${ws.slug}/saved`);
    expect(saved.body.saved.map((r) => r.ref)).toEqual(['refs/grove/demo+keep/teardown/1']);
    const back = await fx.s.api<{ workspace: Workspace }>('POST', `/api/workspaces/${ws.slug}/restore`, { name: 'keep-back' });
    expect(back.status).toBe(201);
    // The saved commit is copied from the workspace's private store into the primary, where the new branch starts.
    expect(back.body.workspace).toMatchObject({ slug: 'demo~keep-back', state: 'running', baseRef: 'refs/grove-restore/demo/keep/1' });
    expectRestored('keep-back', files);
    // The sandbox sees the same files.
    const inside = dockerExec(containerOf(fx.s.instance, 'demo~keep-back') ?? '', ['cat', '/workspace/notes/deep/data.bin']);
    expect(inside.code).toBe(0);
    expect((await fx.s.api('DELETE', '/api/workspaces/demo~keep-back')).status).toBe(200);
  });

  it('never deletes a branch with commits: teardown keeps it and what it holds', async () => {
    const ws = await fork('unpushed');
    fs.writeFileSync(path.join(worktree('unpushed'), 'work.txt'), 'committed, never pushed\n');
    gitInWorktree(worktree('unpushed'), 'add', 'work.txt');
    gitInWorktree(worktree('unpushed'), '-c', 'user.name=t', '-c', 'user.email=t@t.invalid', 'commit', '-q', '-m', 'unpushed work');
    const tip = git(repo, 'rev-parse', 'refs/heads/grove/unpushed');
    expect((await fx.s.api('DELETE', `/api/workspaces/${ws.slug}`)).status).toBe(200);
    expect(git(repo, 'rev-parse', 'refs/heads/grove/unpushed')).toBe(tip);
    expect(git(repo, 'show', 'grove/unpushed:work.txt')).toBe('committed, never pushed');
    // Clean at teardown (everything was committed): nothing to save, and the event says so.
    expect((await events(ws.slug)).find((e) => e.type === 'workspace.cleaned')?.data.recoveryRef).toBeNull();
  });

  it('SIGKILL between saving the work and removing the worktree: nothing is lost after restart', async () => {
    const ws = await fork('killed');
    const files = makeChanges(ws.slug, 'killed');
    await fx.s.stop();

    const script = fileURLToPath(new URL('./support/teardown-and-hang.ts', import.meta.url));
    const child = spawn(process.execPath, ['--import', 'tsx', script, home, fx.s.instance, 'grove-sandbox:latest', ws.slug], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    await new Promise<void>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`teardown never reached the removal:\n${out}\n${err}`)), 60_000);
      child.stdout.on('data', (d: Buffer) => {
        out += d.toString();
        if (out.includes('HANGING\n')) {
          clearTimeout(t);
          resolve();
        }
      });
      child.once('exit', (code) => reject(new Error(`child exited with ${code}:\n${out}\n${err}`)));
    });
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
    expect(out).toContain('"type":"workspace.saved"');
    // Killed with the ref written and the worktree still there.
    expect(git(path.join(home, 'objects', 'demo~killed.git'), 'for-each-ref', '--format=%(refname)', 'refs/grove/demo+killed/')).toBe('refs/grove/demo+killed/teardown/1');
    expect(fs.existsSync(worktree('killed'))).toBe(true);

    await fx.restart();
    // Reconcile finished the teardown, re-saving idempotently (the same ref, no second one).
    const after = await fx.s.api<{ workspace: Workspace }>('GET', `/api/workspaces/${ws.slug}`);
    expect(after.body.workspace.state).toBe('gone');
    expect(fs.existsSync(worktree('killed'))).toBe(false);
    expect(containerOf(fx.s.instance, ws.slug)).toBeUndefined();
    expect(git(path.join(home, 'objects', 'demo~killed.git'), 'for-each-ref', '--format=%(refname)', 'refs/grove/demo+killed/')).toBe('refs/grove/demo+killed/teardown/1');
    const saves = (await events(ws.slug)).filter((e) => e.type === 'workspace.saved');
    expect(saves.map((e) => e.data.reused)).toEqual([false, true]);

    const back = await fx.s.api<{ workspace: Workspace }>('POST', `/api/workspaces/${ws.slug}/restore`, { name: 'killed-back' });
    expect(back.status).toBe(201);
    expectRestored('killed-back', files);
    expect((await fx.s.api('DELETE', '/api/workspaces/demo~killed-back')).status).toBe(200);
  });
});
