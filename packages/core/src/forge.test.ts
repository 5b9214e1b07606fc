// The forge adapters against a loopback HTTP server standing in for the forge's REST API.
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { createForge } from './forge.ts';

const TOKEN = 'tok-3b9e-secret';
let server: Server | null = null;

interface Seen {
  method: string;
  url: string;
  auth: string | undefined;
  body: string;
}

async function serve(answer: (s: Seen) => { status: number; body: unknown }): Promise<{ base: string; seen: Seen[] }> {
  const seen: Seen[] = [];
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const s = { method: req.method ?? '', url: req.url ?? '', auth: req.headers.authorization, body: Buffer.concat(chunks).toString('utf8') };
      seen.push(s);
      const a = answer(s);
      res.writeHead(a.status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(a.body));
    });
  });
  await new Promise<void>((r) => server?.listen(0, '127.0.0.1', r));
  const addr = server.address();
  return { base: `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`, seen };
}

afterEach(async () => {
  await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
  server = null;
});

describe('github adapter', () => {
  it('opens and reads pull requests at the GitHub REST paths with a bearer token; merged_at means merged', async () => {
    const { base, seen } = await serve((s) =>
      s.method === 'POST'
        ? { status: 201, body: { number: 7, html_url: 'https://github.example/o/r/pull/7', state: 'open', merged_at: null } }
        : { status: 200, body: { number: 7, html_url: 'https://github.example/o/r/pull/7', state: 'closed', merged_at: '2026-01-01T00:00:00Z', head: { sha: 'a'.repeat(40) } } },
    );
    const gh = createForge({ kind: 'github', baseUrl: `${base}/api/v3`, owner: 'o', repo: 'r' }, TOKEN);
    expect(await gh.openPullRequest({ head: 'grove/x', base: 'main', title: 'T', body: 'B' })).toEqual({ url: 'https://github.example/o/r/pull/7', number: 7, state: 'open', headSha: null });
    // The head commit the forge names is what a merge took in (the watcher compares the branch with it).
    expect(await gh.getPullRequest(7)).toMatchObject({ state: 'merged', headSha: 'a'.repeat(40) });
    expect(seen.map((s) => `${s.method} ${s.url} ${s.auth}`)).toEqual([`POST /api/v3/repos/o/r/pulls Bearer ${TOKEN}`, `GET /api/v3/repos/o/r/pulls/7 Bearer ${TOKEN}`]);
    expect(JSON.parse(seen[0]?.body ?? '{}')).toEqual({ head: 'grove/x', base: 'main', title: 'T', body: 'B' });
  });

  it('gives git the token only for remotes on the forge host', () => {
    const gh = createForge({ kind: 'github', owner: 'o', repo: 'r' }, TOKEN);
    expect(gh.gitAuthHeader('https://github.com/o/r.git')).toBe(`Authorization: Basic ${Buffer.from(`x-access-token:${TOKEN}`).toString('base64')}`);
    for (const url of ['https://evil.example/o/r.git', 'git@github.com:o/r.git', 'ssh://git@github.com/o/r.git', 'file:///srv/r.git']) expect(gh.gitAuthHeader(url)).toBeNull();
    const gitea = createForge({ kind: 'gitea', baseUrl: 'https://gitea.example', owner: 'o', repo: 'r' }, TOKEN);
    expect(gitea.gitAuthHeader('https://gitea.example/o/r.git')).not.toBeNull();
    expect(gitea.gitAuthHeader('https://gitea.example:8443/o/r.git')).toBeNull();
  });
});

describe('errors', () => {
  it('explain auth failures and unreachable forges, and never carry the token', async () => {
    const { base } = await serve(() => ({ status: 401, body: { message: `bad credentials for ${TOKEN}` } }));
    const gitea = createForge({ kind: 'gitea', baseUrl: base, owner: 'o', repo: 'r' }, TOKEN);
    const err = await gitea.openPullRequest({ head: 'h', base: 'main', title: 'T', body: '' }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'forge_failed', details: { reason: 'auth', status: 401 } });
    expect((err as Error).message).toMatch(/GROVE_FORGE_TOKEN/);
    expect((err as Error).message).not.toContain(TOKEN);

    const down = createForge({ kind: 'gitea', baseUrl: 'http://127.0.0.1:1', owner: 'o', repo: 'r' }, TOKEN);
    await expect(down.getPullRequest(1)).rejects.toMatchObject({ code: 'forge_failed', details: { reason: 'unreachable' } });
  });
});
