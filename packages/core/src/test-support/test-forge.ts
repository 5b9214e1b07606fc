// Test helper: a small Gitea on 127.0.0.1 — the pull-request endpoints the forge adapter uses, backed by a
// real bare repository (a pull request can only be opened for a head branch that exists there).
import { execFileSync, spawn } from 'node:child_process';
import { basename, dirname } from 'node:path';
import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';

export interface TestPull {
  number: number;
  head: string;
  base: string;
  title: string;
  body: string;
  state: 'open' | 'closed';
  merged: boolean;
  /** The head commit when it was merged or closed (the forge reports the branch's tip while it is open). */
  endedAt: string | null;
}

/** A commit status as a CI posts it (Gitea's POST .../statuses/{sha} body). */
export interface TestStatus {
  context: string;
  state: 'pending' | 'success' | 'error' | 'failure' | 'warning';
  target_url?: string;
  description?: string;
}

export interface TestForge {
  baseUrl: string;
  pulls: TestPull[];
  /** The bare repository over smart HTTP (git http-backend): reads are anonymous, pushes need the token. */
  gitUrl: string;
  /** Every request as "<METHOD> <path> <authorization header>". */
  requests: string[];
  /** Answer every request with this status instead (simulates a broken forge). */
  failWith: number | null;
  /** Merge pull request n the way the forge's button does: base fast-forwarded to head in the bare repository. */
  merge(n: number): void;
  /** Close pull request n without merging. */
  closePull(n: number): void;
  /**
   * Post a commit status on pull request n's head commit as a CI would; a later one with the same context replaces
   * it (as on Gitea and GitHub). Answers the commit.
   */
  setStatus(n: number, status: TestStatus): string;
  /** The statuses of each commit. */
  statuses: Map<string, TestStatus[]>;
  close(): Promise<void>;
}

function send(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

async function readBody(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as unknown;
}

function branchExists(bare: string, branch: string): boolean {
  try {
    execFileSync('git', ['-c', 'safe.directory=*', 'rev-parse', '--verify', '--quiet', `refs/heads/${branch}`], { cwd: bare, stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

export async function startTestForge(o: { bare: string; owner: string; repo: string; token: string }): Promise<TestForge> {
  const find = (n: number): TestPull => {
    const p = forge.pulls.find((x) => x.number === n);
    if (!p) throw new Error(`no pull request #${n}`);
    return p;
  };
  const forge: TestForge = {
    baseUrl: '',
    gitUrl: '',
    pulls: [],
    requests: [],
    failWith: null,
    statuses: new Map(),
    close: async () => {},
    merge(n) {
      const p = find(n);
      const head = execFileSync('git', ['-c', 'safe.directory=*', 'rev-parse', `refs/heads/${p.head}`], { cwd: o.bare, encoding: 'utf8' }).trim();
      // Fast-forward only (the tests' branches start at the base's tip); update-ref refuses otherwise.
      execFileSync('git', ['-c', 'safe.directory=*', 'merge-base', '--is-ancestor', `refs/heads/${p.base}`, head], { cwd: o.bare });
      execFileSync('git', ['-c', 'safe.directory=*', 'update-ref', `refs/heads/${p.base}`, head], { cwd: o.bare });
      p.state = 'closed';
      p.merged = true;
      p.endedAt = head;
    },
    closePull(n) {
      const p = find(n);
      p.state = 'closed';
      p.endedAt = headOf(p.head);
    },
    setStatus(n, status) {
      const p = find(n);
      const sha = p.endedAt ?? headOf(p.head);
      if (!sha) throw new Error(`pull request #${n} has no head commit`);
      const list = (forge.statuses.get(sha) ?? []).filter((x) => x.context !== status.context);
      forge.statuses.set(sha, [...list, status]);
      return sha;
    },
  };
  const headOf = (branch: string): string | null => {
    try {
      return execFileSync('git', ['-c', 'safe.directory=*', 'rev-parse', '--verify', '--quiet', `refs/heads/${branch}`], { cwd: o.bare, encoding: 'utf8' }).trim() || null;
    } catch {
      return null;
    }
  };
  const prefix = `/api/v1/repos/${o.owner}/${o.repo}/pulls`;
  const toJson = (p: TestPull) => ({
    number: p.number,
    html_url: `${forge.baseUrl}/${o.owner}/${o.repo}/pulls/${p.number}`,
    state: p.state,
    merged: p.merged,
    head: { ref: p.head, sha: p.endedAt ?? headOf(p.head) },
    base: { ref: p.base },
    title: p.title,
  });
  const gitPrefix = `/${o.owner}/${o.repo}.git`;
  const basic = `Basic ${Buffer.from(`grove:${o.token}`).toString('base64')}`;
  // Smart HTTP through git http-backend (CGI): the way a forge serves its repositories.
  const gitHttp = async (req: IncomingMessage, res: ServerResponse, rest: string): Promise<void> => {
    const [pathPart = '', query = ''] = rest.split('?');
    const pushing = pathPart.endsWith('/git-receive-pack') || query.includes('service=git-receive-pack');
    if (pushing && req.headers.authorization !== basic) {
      res.writeHead(401, { 'www-authenticate': 'Basic realm="test forge"' });
      res.end('authentication required');
      return;
    }
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const env: Record<string, string> = {
      PATH: '/usr/local/bin:/usr/bin:/bin',
      GIT_PROJECT_ROOT: dirname(o.bare),
      GIT_HTTP_EXPORT_ALL: '1',
      PATH_INFO: `/${basename(o.bare)}${pathPart}`,
      QUERY_STRING: query,
      REQUEST_METHOD: req.method ?? 'GET',
      CONTENT_TYPE: req.headers['content-type'] ?? '',
      ...(pushing ? { REMOTE_USER: 'grove' } : {}),
    };
    // Exactly these variables (Next's types, in the root typecheck, make NODE_ENV required on ProcessEnv).
    const child = spawn('git', ['-c', 'safe.directory=*', 'http-backend'], { env: env as NodeJS.ProcessEnv, stdio: ['pipe', 'pipe', 'ignore'] });
    child.stdin.end(Buffer.concat(chunks));
    const out: Buffer[] = [];
    for await (const c of child.stdout) out.push(c as Buffer);
    const all = Buffer.concat(out);
    const split = all.indexOf('\r\n\r\n');
    const head = all.subarray(0, split).toString('utf8');
    let status = 200;
    const headers: Record<string, string> = {};
    for (const line of head.split('\r\n')) {
      const i = line.indexOf(':');
      const k = line.slice(0, i).trim();
      const v = line.slice(i + 1).trim();
      if (k.toLowerCase() === 'status') status = Number.parseInt(v, 10);
      else if (k) headers[k] = v;
    }
    res.writeHead(status, headers);
    res.end(all.subarray(split + 4));
  };
  const server: Server = createServer((req, res) => {
    void (async () => {
      const url = req.url ?? '/';
      forge.requests.push(`${req.method} ${url} ${req.headers.authorization ?? ''}`);
      if (url.startsWith(gitPrefix)) return gitHttp(req, res, url.slice(gitPrefix.length));
      if (forge.failWith) return send(res, forge.failWith, { message: 'the test forge is failing on purpose' });
      if (req.headers.authorization !== `token ${o.token}`) return send(res, 401, { message: 'token is required' });
      if (req.method === 'POST' && url === prefix) {
        const b = (await readBody(req)) as { head?: string; base?: string; title?: string; body?: string };
        if (!b.head || !b.base || !b.title) return send(res, 422, { message: 'head, base and title are required' });
        if (!branchExists(o.bare, b.head) || !branchExists(o.bare, b.base)) return send(res, 404, { message: `branch ${b.head} or ${b.base} does not exist` });
        if (forge.pulls.some((p) => p.head === b.head && p.base === b.base && p.state === 'open')) return send(res, 409, { message: 'pull request already exists for these targets' });
        const pull: TestPull = { number: forge.pulls.length + 1, head: b.head, base: b.base, title: b.title, body: b.body ?? '', state: 'open', merged: false, endedAt: null };
        forge.pulls.push(pull);
        // Like Gitea and GitHub: the head is also served as refs/pull/<n>/head (forks from a pull request read it).
        execFileSync('git', ['-c', 'safe.directory=*', 'update-ref', `refs/pull/${pull.number}/head`, `refs/heads/${b.head}`], { cwd: o.bare });
        return send(res, 201, toJson(pull));
      }
      // Gitea's combined status of a commit (the latest status of each context).
      const st = new RegExp(`^/api/v1/repos/${o.owner}/${o.repo}/commits/([0-9a-f]{40})/status(\\?.*)?$`).exec(url);
      if (req.method === 'GET' && st) {
        const statuses = forge.statuses.get(st[1] ?? '') ?? [];
        return send(res, 200, { sha: st[1], total_count: statuses.length, statuses: statuses.map((x) => ({ ...x, id: 1 })) });
      }
      const m = new RegExp(`^${prefix}/(\\d+)$`).exec(url);
      const pull = m ? forge.pulls.find((p) => p.number === Number(m[1])) : undefined;
      if (req.method === 'GET' && pull) return send(res, 200, toJson(pull));
      return send(res, 404, { message: 'not found' });
    })().catch((e: unknown) => send(res, 500, { message: String(e) }));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const addr = server.address();
  forge.baseUrl = `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`;
  forge.gitUrl = `${forge.baseUrl}${gitPrefix}`;
  forge.close = () => new Promise((r) => server.close(() => r()));
  return forge;
}
