// The config-parity overlay in a real sandbox: files taken from a local checkout are there, read-only ones cannot be
// changed, the writable copy belongs to the agent, and the host's checkpoint and teardown carry none of them.
import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { recoveryRefPrefix } from '@grove/contracts';
import { createDockerDriver, LABELS } from '@grove/sandbox';
import { pino } from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { createTestGrove } from './test-support/test-grove.ts';
import type { Grove } from './index.ts';
import { git, makeSourceRepo } from './test-support/repo.ts';

const IMAGE = process.env.GROVE_SANDBOX_IMAGE ?? 'grove-sandbox:latest';
const INSTANCE = `ovl-${randomBytes(4).toString('hex')}`;
const SECRET = 'OVERLAY_DOCKER_SECRET_41d2';

const tmp = mkdtempSync(join(tmpdir(), 'grove-ovldk-'));
let grove: Grove | null = null;

afterAll(async () => {
  await grove?.close();
  const ids = execFileSync('docker', ['ps', '-aq', '--filter', `label=${LABELS.instance}=${INSTANCE}`], { encoding: 'utf8' }).trim();
  if (ids) execFileSync('docker', ['rm', '-f', ...ids.split('\n')], { stdio: 'ignore' });
  rmSync(tmp, { recursive: true, force: true });
});

/** A shell command in the workspace's container, as its user. */
function sh(slug: string, script: string): { code: number; out: string } {
  const id = execFileSync('docker', ['ps', '-q', '--filter', `label=${LABELS.instance}=${INSTANCE}`, '--filter', `label=${LABELS.slug}=${slug}`], { encoding: 'utf8' }).trim();
  const r = spawnSync('docker', ['exec', '-u', '1000:1000', '-w', '/workspace', id, 'sh', '-c', script], { encoding: 'utf8' });
  return { code: r.status ?? -1, out: `${r.stdout}${r.stderr}` };
}

describe('overlay files in a real sandbox', () => {
  it('are present, read-only unless writable, hidden from git status, and absent from the checkpoint and the recovery ref', async () => {
    const src = makeSourceRepo(join(tmp, 'src'));
    mkdirSync(join(src, '.claude'));
    writeFileSync(join(src, '.claude', 'settings.local.json'), `{"secret":"${SECRET}"}\n`);
    writeFileSync(join(src, '.env'), `TOKEN=${SECRET}\n`);
    writeFileSync(join(src, '.envrc'), 'export A=1\n');
    const home = mkdtempSync(join(tmp, 'home-'));
    grove = await createTestGrove({ home, driver: createDockerDriver({ instance: INSTANCE }), image: IMAGE, maxRunning: 2, logger: pino({ level: 'silent' }), healthTimeoutMs: 30_000 });
    await grove.addProject({ name: 'demo', source: src, createDefault: false, config: { overlay: { writable: ['.envrc'] } } });
    await grove.fork({ project: 'demo', name: 'w' });

    expect(sh('demo~w', 'cat .claude/settings.local.json .env').out).toBe(`{"secret":"${SECRET}"}\nTOKEN=${SECRET}\n`);
    for (const change of ['echo x > .env', 'rm -f .env', 'mv .claude/settings.local.json x.json', 'echo x > .claude/settings.local.json']) {
      expect(sh('demo~w', change).code, change).not.toBe(0);
    }
    // The writable one is the agent's; the directory Grove made for a mount point is too.
    expect(sh('demo~w', 'echo "export B=2" >> .envrc && touch .claude/notes.md && echo changed > app.txt').code).toBe(0);
    const status = sh('demo~w', 'git status --porcelain --untracked-files=all');
    expect(status.code, status.out).toBe(0);
    expect(status.out.split('\n').map((l) => l.trim()).filter(Boolean).sort()).toEqual(['?? .claude/notes.md', 'M app.txt']);

    const cp = await grove.checkpoint('demo~w', { message: 'work' });
    expect(cp.files.sort()).toEqual(['.claude/notes.md', 'app.txt']);
    const repo = join(home, 'repos', 'demo');
    expect(git(repo, 'ls-tree', '-r', '--name-only', 'refs/heads/grove/w').split('\n').filter((p) => /\.env|settings\.local/.test(p))).toEqual([]);

    expect(sh('demo~w', 'echo more >> app.txt').code).toBe(0);
    await grove.teardown('demo~w');
    // Saved work lives in the workspace's private store (never mounted), not in the primary.
    const store = join(home, 'objects', 'demo~w.git');
    const ref = git(store, 'for-each-ref', '--format=%(refname)', recoveryRefPrefix('demo~w'));
    expect(ref).not.toBe('');
    expect(git(store, 'ls-tree', '-r', '--name-only', ref).split('\n').filter((p) => /\.env|settings\.local/.test(p))).toEqual([]);
    expect(existsSync(join(home, 'worktrees', 'demo', 'w'))).toBe(false);
  });
});
