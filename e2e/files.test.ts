// The Files view's reads against the real stack: GET /w/<slug>/files/tree and /files/content answered by the backend in
// a real sandbox, over a worktree where the agent's user planted links to the backend's socket, its thread, root's
// environment and /etc/shadow, a FIFO, a 3 MiB file, a binary file and an fsmonitor hook. None of it leaks or hangs.
import { describe, expect, it, beforeAll } from 'vitest';
import { FILE_CONTENT_CAP, fileContentResponseSchema, filesTreeResponseSchema } from '@grove/contracts';
import type { FileEntry } from '@grove/contracts';
import { containerOf, dockerExec, useServer } from './harness.ts';

const ctx = useServer('files');
const SLUG = 'demo';

const LINKS: Record<string, string> = {
  'sock-link': '/run/grove/backend.sock',
  'thread-link': '/var/lib/grove/thread/thread.jsonl',
  'environ-link': '/proc/1/environ',
  'shadow-link': '/etc/shadow',
  'thread-dir': '/var/lib/grove/thread',
};

function agent(script: string): string {
  const container = containerOf(ctx.s.instance, SLUG);
  if (!container) throw new Error('no container for demo');
  const r = dockerExec(container, ['sh', '-c', script]);
  expect(r.code, r.out).toBe(0);
  return r.out;
}

async function content(path: string) {
  return ctx.s.api<Record<string, unknown>>('GET', `/w/${SLUG}/files/content?path=${encodeURIComponent(path)}`);
}

describe('workspace files', () => {
  beforeAll(() => {
    const links = Object.entries(LINKS)
      .map(([name, target]) => `ln -s ${target} /workspace/${name}`)
      .join(' && ');
    agent(
      [
        'set -e',
        links,
        'mkfifo /workspace/fifo',
        // 3 MiB of text: it must come cut at the cap, not whole.
        "yes 'a line of plain text for the viewer' | head -c 3145728 > /workspace/big.txt",
        "printf 'PNG\\000\\001\\002' > /workspace/blob.bin",
        "printf 'console.log(1);\\n' >> /workspace/src/greet.js",
        // An fsmonitor hook the agent set for itself: the backend's git must not run it.
        "printf '#!/bin/sh\\ntouch /tmp/fsmonitor-ran\\n' > /workspace/fsmon.sh && chmod +x /workspace/fsmon.sh",
        'git config --global core.fsmonitor /workspace/fsmon.sh',
      ].join('\n'),
    );
  });

  it('lists the top: links as links with their target, the FIFO as other, .git hidden, git marks', async () => {
    const r = await ctx.s.api('GET', `/w/${SLUG}/files/tree`);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const tree = filesTreeResponseSchema.parse(r.body);
    expect(tree.gitError).toBeUndefined();
    const byName = new Map<string, FileEntry>(tree.entries.map((e) => [e.name, e]));
    expect(byName.has('.git')).toBe(false);
    for (const [name, target] of Object.entries(LINKS)) expect(byName.get(name), name).toMatchObject({ kind: 'symlink', target });
    expect(byName.get('fifo')).toMatchObject({ kind: 'other' });
    expect(byName.get('src')).toMatchObject({ kind: 'dir', mark: 'M' });
    expect(byName.get('big.txt')).toMatchObject({ kind: 'file', size: 3 * 1024 * 1024, mark: '?' });
    expect(byName.get('README.md')).toMatchObject({ kind: 'file', mark: null });
    const src = filesTreeResponseSchema.parse((await ctx.s.api('GET', `/w/${SLUG}/files/tree?path=src`)).body);
    expect(src.entries.find((e) => e.name === 'greet.js')).toMatchObject({ mark: 'M', path: 'src/greet.js' });
    // The agent's fsmonitor hook was set, and git ran without it.
    expect(agent('test -e /tmp/fsmonitor-ran && echo ran || echo not-run').trim()).toBe('not-run');
  });

  it('refuses every planted link and the FIFO without following or hanging, and leaks nothing', async () => {
    for (const name of Object.keys(LINKS)) {
      const r = await content(name);
      expect(r.status, `${name}: ${JSON.stringify(r.body)}`).toBe(422);
      expect(String(r.body.message)).toMatch(/symlink/);
    }
    // Through a linked directory: the parent is a link, so nothing under it is read.
    const viaDir = await content('thread-dir/thread.jsonl');
    expect(viaDir.status).toBe(422);
    expect(JSON.stringify(viaDir.body)).not.toMatch(/"kind":"user"|seq/);
    const dirList = await ctx.s.api('GET', `/w/${SLUG}/files/tree?path=thread-dir`);
    expect(dirList.status).toBe(422);
    const fifo = await content('fifo');
    expect(fifo.status).toBe(422);
    expect(String(fifo.body.message)).toMatch(/not a regular file/);
    for (const p of ['.git/config', '.git', '../etc/passwd', '/etc/shadow']) {
      const r = await content(p);
      expect([404, 422], `${p}: ${JSON.stringify(r.body)}`).toContain(r.status);
    }
    // The backend is still whole after all of that.
    expect((await ctx.s.api('GET', `/w/${SLUG}/status`)).status).toBe(200);
  });

  it('reads text, cuts a 3 MiB file at the cap with its size, and says binary without sending bytes', async () => {
    const greet = fileContentResponseSchema.parse((await content('src/greet.js')).body);
    expect(greet.binary === false && greet.text).toMatch(/console\.log\(1\);\n$/);
    const big = fileContentResponseSchema.parse((await content('big.txt')).body);
    expect(big).toMatchObject({ binary: false, truncated: true, size: 3 * 1024 * 1024 });
    expect(big.binary === false && big.text.length).toBe(FILE_CONTENT_CAP);
    expect((await content('blob.bin')).body).toEqual({ path: 'blob.bin', binary: true, size: 6 });
    expect((await content('missing.txt')).status).toBe(404);
  });
});
