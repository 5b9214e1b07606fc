// Issue 14, from inside real sandboxes as uid 1000: host git over the agent's tree runs none of the agent's
// configuration (a nested repository's fsmonitor or filter, through every host trigger), the staged index of a
// checkpoint cannot be swapped for a link that hands a host file over, and one workspace reads nothing of another's
// turn snapshots, previews or saved work. A marker file on the host is the evidence for code execution.
import { execFile, execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { request } from 'node:http';
import { join } from 'node:path';
import { createDockerDriver, LABELS } from '@grove/sandbox';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestGrove } from './test-support/test-grove.ts';
import type { Grove } from './index.ts';
import { git, makeSourceRepo } from './test-support/repo.ts';

// GROVE_SANDBOX_IMAGE: an image built from this tree (docker/build-image.sh), else the shared one.
const IMAGE = process.env.GROVE_SANDBOX_IMAGE ?? 'grove-sandbox:latest';
const INSTANCE = `gat-${randomBytes(4).toString('hex')}`;

const tmp = mkdtempSync(join(tmpdir(), 'grove-gitattack-'));
const markers = join(tmp, 'markers');
let grove: Grove;
let home: string;
let vendoredSha: string;

beforeAll(async () => {
  mkdirSync(markers);
  const src = makeSourceRepo(join(tmp, 'src'));
  // The project has a submodule (a gitlink): its checkout is an empty directory the agent can turn into a repository.
  vendoredSha = git(src, 'rev-parse', 'HEAD~1');
  git(src, 'update-index', '--add', '--cacheinfo', `160000,${vendoredSha},vendored`);
  git(src, 'commit', '-q', '-m', 'a submodule');
  home = mkdtempSync(join(tmp, 'home-'));
  grove = await createTestGrove({ home, driver: createDockerDriver({ instance: INSTANCE }), image: IMAGE, maxRunning: 4, logger: pino({ level: 'silent' }), healthTimeoutMs: 30_000 });
  // No checkpoint after a turn: what a turn leaves uncommitted must stay the workspace's own.
  await grove.addProject({ name: 'demo', source: src, createDefault: false, config: { git: { checkpointAfterTurn: false } } });
}, 180_000);

afterAll(async () => {
  await grove?.close();
  const ids = execFileSync('docker', ['ps', '-aq', '--filter', `label=${LABELS.instance}=${INSTANCE}`], { encoding: 'utf8' }).trim();
  if (ids) execFileSync('docker', ['rm', '-f', ...ids.split('\n')], { stdio: 'ignore' });
  rmSync(tmp, { recursive: true, force: true });
});

function container(slug: string): string {
  const id = execFileSync('docker', ['ps', '-q', '--filter', `label=${LABELS.instance}=${INSTANCE}`, '--filter', `label=${LABELS.slug}=${slug}`], { encoding: 'utf8' }).trim();
  if (!id) throw new Error(`no container for ${slug}`);
  return id;
}

/**
 * A shell script in the workspace's container as the agent: uid 1000, in /workspace. Asynchronous: the host
 * services the script talks to (host.sock) run in this very process.
 */
function agent(slug: string, script: string): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile('docker', ['exec', '-u', '1000:1000', '-w', '/workspace', container(slug), 'sh', '-c', script], { encoding: 'utf8', timeout: 120_000, maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : -1) : 0;
      resolve({ code, out: `${stdout}${stderr}` });
    });
  });
}

async function agentOk(slug: string, script: string): Promise<string> {
  const r = await agent(slug, script);
  expect(r.code, r.out).toBe(0);
  return r.out;
}

/**
 * What the sandbox's backend does when the agent's turn ends: POST /turn-ended on the workspace's host.sock (no
 * user action involved). Sent from the host side of the socket: the backend, not the agent, is its client.
 */
function turnEnded(slug: string, turn: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const body = JSON.stringify({ turn, status: 'completed' });
    const req = request(
      { socketPath: join(home, 'run', slug, 'host.sock'), path: '/turn-ended', method: 'POST', headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } },
      (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString('utf8')));
        res.on('end', () => resolve(`${res.statusCode ?? 0} ${text}`));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** The marker files commands left since the last look (each look clears them, so every trigger is told apart). */
function markersNow(): string[] {
  const found = readdirSync(markers).sort();
  for (const f of found) rmSync(join(markers, f), { force: true });
  return found;
}

describe('host git never runs what the agent configured (nested repositories)', () => {
  it('a nested repository\'s fsmonitor and clean filter, and a gitlink checked out as a hostile repository, fire on no trigger', async () => {
    await grove.fork({ project: 'demo', name: 'nest' });
    const slug = 'demo~nest';
    const hostile = (name: string): string =>
      [
        `git config core.fsmonitor 'touch ${markers}/fsmonitor-${name}'`,
        `git config filter.evil.clean 'touch ${markers}/filter-${name}; cat'`,
        `git config filter.evil.smudge 'touch ${markers}/smudge-${name}; cat'`,
        // Hooks inside the nested repository's own git dir (so they are no file of the worktree).
        `mkdir -p .git/evil-hooks && printf '#!/bin/sh\\ntouch ${markers}/hook-${name}\\n' > .git/evil-hooks/post-index-change && chmod +x .git/evil-hooks/post-index-change`,
        `git config core.hooksPath "$PWD/.git/evil-hooks"`,
        `git config diff.evil.textconv 'touch ${markers}/textconv-${name}; cat'`,
      ].join(' && ');
    await agentOk(
      slug,
      [
        'set -e',

        // An untracked nested repository with its own config and attributes.
        'git init -q nested && cd nested',
        'echo data > f.txt && printf "* filter=evil diff=evil\\n" > .gitattributes',
        'git add . && git -c user.name=a -c user.email=a@b commit -q -m x',
        hostile('nested'),
        'echo changed >> f.txt',
        'cd /workspace',
        // The project's gitlink: its (empty) checkout directory made into a repository the agent configures.
        // At exactly the commit the project records, so git sees the gitlink unchanged and would look inside it.
        'SHA=$(git ls-tree HEAD vendored | cut -d" " -f3 | cut -f1)',
        'export GIT_CONFIG_GLOBAL=/tmp/agent.gitconfig && git config --global --add safe.directory "*"',
        'git clone -q --no-checkout "$(git rev-parse --git-common-dir)" vendored',
        'cd vendored && git checkout -q --detach "$SHA" && printf "* filter=evil\\n" > .gitattributes',
        hostile('gitlink'),
        'echo changed >> app.txt',
        'cd /workspace && echo top > top.txt',
      ].join('\n'),
    );

    // Every trigger, and what it left in the markers dir (the evidence of a command run on the host).
    const fired: Record<string, string[]> = {};
    expect(await turnEnded(slug, 'turn-1')).toMatch(/^200 /);
    fired['POST /turn-ended'] = markersNow();
    const diff = await grove.diff(slug);
    fired['GET diff'] = markersNow();
    const preview = await grove.teardownPreview(slug);
    fired['GET teardown-preview'] = markersNow();
    const cp = await grove.checkpoint(slug, { message: 'cp' });
    fired['POST checkpoint'] = markersNow();
    // Once more over the recorded state (the old second trigger: `git status` inside a recorded gitlink).
    await agentOk(slug, 'echo again >> top.txt');
    expect(await turnEnded(slug, 'turn-2')).toMatch(/^200 /);
    fired['POST /turn-ended again'] = markersNow();
    await grove.checkpoint(slug, { message: 'cp2' });
    fired['POST checkpoint again'] = markersNow();
    await grove.diff(slug);
    await grove.teardownPreview(slug);
    fired['diff and preview again'] = markersNow();
    expect(fired).toEqual(Object.fromEntries(Object.keys(fired).map((k) => [k, []])));
    expect(diff.files.map((f) => f.path)).toEqual(['top.txt']);
    expect(preview.uncommitted.files.map((f) => f.path)).toEqual(['top.txt']);
    expect(cp.files).toEqual(['top.txt']);

    // Recorded as what they are: the gitlink as the project has it, the nested repository not at all.
    const repo = join(home, 'repos', 'demo');
    expect(git(repo, 'ls-tree', 'refs/heads/grove/nest', 'vendored')).toBe(`160000 commit ${vendoredSha}\tvendored`);
    expect(git(repo, 'ls-tree', '-r', '--name-only', 'refs/heads/grove/nest').split('\n').filter((p) => p.startsWith('nested'))).toEqual([]);
  }, 240_000);
});

describe('the checkpoint\'s staged index cannot be turned into a chown of a host file', () => {
  it('an agent swapping every index.grove-* it sees in its admin dir for a link to a root-owned file changes nothing', async () => {
    await grove.fork({ project: 'demo', name: 'race' });
    const slug = 'demo~race';
    const victim = join(tmp, 'victim');
    writeFileSync(victim, 'root only\n');
    chmodSync(victim, 0o600);
    // The agent's loop: replace any staged index the host writes next to its index with a link to the victim.
    const loop = [
      'ADMIN=$(sed -n "s/^gitdir: //p" /workspace/.git)',
      'end=$(( $(date +%s) + 120 ))',
      'while [ ! -e /tmp/stop-race ] && [ $(date +%s) -lt $end ]; do',
      '  for f in "$ADMIN"/index.grove-* "$ADMIN"/index-*; do',
      '    [ -e "$f" ] || continue',
      `    [ -L "$f" ] || { rm -f "$f" && ln -s ${victim} "$f" && echo swapped >> /tmp/race-log; }`,
      '  done',
      'done',
    ].join('\n');
    execFileSync('docker', ['exec', '-d', '-u', '1000:1000', container(slug), 'sh', '-c', loop]);
    try {
      for (let i = 0; i < 12; i++) {
        await agentOk(slug, `echo ${i} > n${i}.txt`);
        await grove.checkpoint(slug, { message: `race ${i}` }).catch(() => undefined);
        if (statSync(victim).uid !== 0) break;
      }
    } finally {
      await agent(slug, 'touch /tmp/stop-race');
    }
    const st = statSync(victim);
    expect(st.uid).toBe(0);
    expect(st.mode & 0o777).toBe(0o600);
    expect(readFileSync(victim, 'utf8')).toBe('root only\n');
    // The checkpoint still did its job: the worktree's index is a regular file the sandbox user owns, and clean.
    // (The sandbox's own git dir when it has one, else the host's admin dir.)
    const own = join(home, 'sandbox-git', slug);
    const index = existsSync(own) ? join(own, 'index') : join(home, 'repos', 'demo', 'worktrees', 'race', 'index');
    expect(lstatSync(index).isFile()).toBe(true);
    expect(lstatSync(index).uid).toBe(1000);
    expect((await agentOk(slug, 'git status --porcelain')).trim()).toBe('');
  }, 240_000);
});

describe('one workspace reads nothing of another\'s snapshots, previews or saved work', () => {
  it('from inside B: no ref of A, and A\'s uncommitted content is in no object, ref or file B can read', async () => {
    const secret = `SNAPSHOT_SECRET_${randomBytes(6).toString('hex')}`;
    const shared = `SHARED_WORK_${randomBytes(6).toString('hex')}`;
    await grove.fork({ project: 'demo', name: 'sa' });
    await grove.fork({ project: 'demo', name: 'sb' });
    // A's committed work is shared by design (branches live in the primary): it is the positive control below.
    await agentOk('demo~sa', `echo ${shared} > shared.txt`);
    await grove.checkpoint('demo~sa', { message: 'shared' });
    await agentOk('demo~sa', `echo ${secret} > untracked.txt && echo ${secret} >> README.md`);
    // Everything that snapshots A's worktree: the turn hook, the diff, the teardown preview, the teardown's save.
    expect(await turnEnded('demo~sa', 'turn-1')).toMatch(/^200 /);
    expect((await grove.diff('demo~sa')).patch).toContain(secret);
    expect((await grove.teardownPreview('demo~sa')).uncommitted.total).toBe(2);
    await grove.teardown('demo~sa');
    expect((await grove.savedWork('demo~sa')).length).toBe(1);

    // From inside B, as the agent: refs, every object git can reach (packs, loose, alternates), and the raw files.
    const refs = await agentOk('demo~sb', 'git for-each-ref --format="%(refname)"; git -C "$(git rev-parse --git-common-dir)" for-each-ref --format="%(refname)"');
    const scan = [
      'set -e',
      'COMMON=$(cd "$(git rev-parse --git-common-dir)" && pwd)',
      'echo "objects: $(git cat-file --batch-all-objects --batch-check | wc -l)"',
      `echo "secret-in-objects: $(git cat-file --batch-all-objects --batch | grep -c ${secret} || true)"`,
      `echo "shared-in-objects: $(git cat-file --batch-all-objects --batch | grep -c ${shared} || true)"`,
      `echo "secret-in-files: $(grep -rl ${secret} "$COMMON" 2>/dev/null | wc -l)"`,
      // Loose objects decompressed one by one, in case any escaped git's listing.
      `node -e "const fs=require('fs'),z=require('zlib'),p=require('path');let n=0;const d=p.join(process.argv[1],'objects');for(const a of fs.readdirSync(d)){if(!/^[0-9a-f]{2}$/.test(a))continue;for(const f of fs.readdirSync(p.join(d,a))){try{if(z.inflateSync(fs.readFileSync(p.join(d,a,f))).includes('${secret}'))n++}catch{}}}console.log('secret-in-loose: '+n)" "$COMMON"`,
    ].join('\n');
    const out = await agentOk('demo~sb', scan);
    // The scan can see: B reads objects, A's committed (shared) work among them.
    expect(out).toMatch(/objects: [1-9]/);
    expect(out).toMatch(/shared-in-objects: [1-9]/);
    const line = (key: string) => new RegExp(`${key}: (\\d+)`).exec(out)?.[1];
    expect({ refsOfA: refs.split('\n').filter((r) => r.includes('demo+sa')), objects: line('secret-in-objects'), files: line('secret-in-files'), loose: line('secret-in-loose') }).toEqual({
      refsOfA: [],
      objects: '0',
      files: '0',
      loose: '0',
    });
    expect(existsSync(join(home, 'objects', 'demo~sa.git'))).toBe(true);
  }, 300_000);
});
