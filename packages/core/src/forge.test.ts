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

/** An in-memory forge: answers by path, records what was asked; no socket. */
function memoryFetch(routes: Record<string, { status?: number; body: unknown }>): { fetch: typeof fetch; asked: string[] } {
  const asked: string[] = [];
  const f = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const url = new URL(typeof input === 'string' ? input : input instanceof URL ? input.href : input.url);
    const auth = new Headers(init?.headers).get('authorization') ?? '';
    asked.push(`${init?.method ?? 'GET'} ${url.pathname}${url.search} ${auth}`);
    const r = routes[url.pathname];
    if (!r) return new Response(JSON.stringify({ message: 'not found' }), { status: 404 });
    return new Response(JSON.stringify(r.body), { status: r.status ?? 200, headers: { 'content-type': 'application/json' } });
  };
  return { fetch: f as typeof fetch, asked };
}

const SHA = 'c'.repeat(40);

describe('checks of a pull request head', () => {
  it('gitea: the combined commit status, each status as success / failure / pending with its link', async () => {
    const { fetch, asked } = memoryFetch({
      [`/api/v1/repos/o/r/commits/${SHA}/status`]: {
        body: {
          state: 'failure',
          statuses: [
            { context: 'ci/build', state: 'success', target_url: 'https://ci.example/1', description: 'Build passed' },
            { context: 'ci/test', state: 'failure', target_url: 'https://ci.example/2', description: 'Tests failed' },
            { context: 'ci/lint', state: 'error', target_url: null },
            { context: 'ci/slow', state: 'pending', target_url: 'javascript:alert(1)' },
            { context: 'ci/warn', state: 'warning' },
          ],
        },
      },
    });
    const gitea = createForge({ kind: 'gitea', baseUrl: 'https://gitea.example', owner: 'o', repo: 'r' }, TOKEN, { fetch });
    const checks = await gitea.getChecks(SHA);
    expect(checks).toMatchObject({ state: 'failure', total: 5, success: 1, failure: 3, pending: 1 });
    expect(checks.checks).toEqual([
      { name: 'ci/build', state: 'success', url: 'https://ci.example/1', description: 'Build passed' },
      { name: 'ci/test', state: 'failure', url: 'https://ci.example/2', description: 'Tests failed' },
      { name: 'ci/lint', state: 'failure', url: null, description: null },
      // A link the dashboard would render is only ever http(s).
      { name: 'ci/slow', state: 'pending', url: null, description: null },
      { name: 'ci/warn', state: 'failure', url: null, description: null },
    ]);
    // Gitea has no check runs: one call, with its token header.
    expect(asked).toEqual([`GET /api/v1/repos/o/r/commits/${SHA}/status?per_page=100 token ${TOKEN}`]);
  });

  it('github: statuses and check runs together; running runs are pending, neutral and skipped are green', async () => {
    const { fetch, asked } = memoryFetch({
      [`/repos/o/r/commits/${SHA}/status`]: { body: { state: 'success', statuses: [{ context: 'deploy', state: 'success', target_url: 'https://d.example/x' }] } },
      [`/repos/o/r/commits/${SHA}/check-runs`]: {
        body: {
          total_count: 4,
          check_runs: [
            { name: 'build', status: 'completed', conclusion: 'success', html_url: 'https://github.com/o/r/runs/1' },
            { name: 'docs', status: 'completed', conclusion: 'skipped', html_url: null, details_url: 'https://ci.example/docs' },
            { name: 'e2e', status: 'in_progress', conclusion: null, html_url: 'https://github.com/o/r/runs/3' },
            { name: 'lint', status: 'queued', conclusion: null },
          ],
        },
      },
    });
    const gh = createForge({ kind: 'github', owner: 'o', repo: 'r' }, TOKEN, { fetch });
    const checks = await gh.getChecks(SHA);
    expect(checks).toMatchObject({ state: 'pending', total: 5, success: 3, failure: 0, pending: 2 });
    expect(checks.checks.map((c) => [c.name, c.state, c.url])).toEqual([
      ['deploy', 'success', 'https://d.example/x'],
      ['build', 'success', 'https://github.com/o/r/runs/1'],
      ['docs', 'success', 'https://ci.example/docs'],
      ['e2e', 'pending', 'https://github.com/o/r/runs/3'],
      ['lint', 'pending', null],
    ]);
    expect(asked).toEqual([`GET /repos/o/r/commits/${SHA}/status?per_page=100 Bearer ${TOKEN}`, `GET /repos/o/r/commits/${SHA}/check-runs?per_page=100 Bearer ${TOKEN}`]);
  });

  it('a failed run fails the verdict; no checks at all is none; every check passing is success', async () => {
    const run = async (statuses: unknown[], runs: unknown[]) => {
      const { fetch } = memoryFetch({ [`/repos/o/r/commits/${SHA}/status`]: { body: { statuses } }, [`/repos/o/r/commits/${SHA}/check-runs`]: { body: { check_runs: runs } } });
      return createForge({ kind: 'github', owner: 'o', repo: 'r' }, TOKEN, { fetch }).getChecks(SHA);
    };
    expect((await run([], [{ name: 'a', status: 'completed', conclusion: 'timed_out' }, { name: 'b', status: 'in_progress' }])).state).toBe('failure');
    expect(await run([], [])).toEqual({ state: 'none', total: 0, success: 0, failure: 0, pending: 0, checks: [] });
    expect((await run([{ context: 'x', state: 'success' }], [{ name: 'y', status: 'completed', conclusion: 'success' }])).state).toBe('success');
  });

  it('caps what it keeps, cuts long names, and turns a broken or refusing forge into forge_failed', async () => {
    const many = Array.from({ length: 150 }, (_, i) => ({ context: `${'n'.repeat(300)}${i}`, state: i === 149 ? 'failure' : 'success' }));
    const { fetch } = memoryFetch({ [`/api/v1/repos/o/r/commits/${SHA}/status`]: { body: { statuses: many } } });
    const checks = await createForge({ kind: 'gitea', baseUrl: 'https://g.example', owner: 'o', repo: 'r' }, TOKEN, { fetch }).getChecks(SHA);
    // The verdict counts every check, also the ones beyond what is listed.
    expect(checks).toMatchObject({ state: 'failure', total: 150, failure: 1 });
    expect(checks.checks).toHaveLength(100);
    expect(checks.checks[0]?.name).toHaveLength(200);

    const broken = memoryFetch({ [`/api/v1/repos/o/r/commits/${SHA}/status`]: { body: { statuses: 'nope' } } });
    await expect(createForge({ kind: 'gitea', baseUrl: 'https://g.example', owner: 'o', repo: 'r' }, TOKEN, { fetch: broken.fetch }).getChecks(SHA)).rejects.toMatchObject({ code: 'forge_failed' });
    const refusing = memoryFetch({ [`/repos/o/r/commits/${SHA}/status`]: { status: 403, body: { message: `no access for ${TOKEN}` } } });
    const err = await createForge({ kind: 'github', owner: 'o', repo: 'r' }, TOKEN, { fetch: refusing.fetch })
      .getChecks(SHA)
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'forge_failed', details: { reason: 'auth', status: 403 } });
    expect((err as Error).message).not.toContain(TOKEN);
    // Never a path from something that is not a commit id.
    await expect(createForge({ kind: 'github', owner: 'o', repo: 'r' }, TOKEN, { fetch: refusing.fetch }).getChecks('../../x')).rejects.toMatchObject({ code: 'invalid_input' });
  });
});
