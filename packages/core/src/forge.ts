import { GroveError, MAX_CHECKS, forgeCheckRunsSchema, forgeCombinedStatusSchema, forgePullSchema } from '@grove/contracts';
import type { CheckState, ForgeConfig, PullRequest, PullRequestCheck, PullRequestChecks } from '@grove/contracts';

/**
 * Forge adapters: open and read pull requests over a forge's REST API. One interface, a Gitea and a GitHub
 * implementation. The token is sent only in the Authorization header of these requests; it is blanked out of
 * every error message, and nothing here logs.
 */
/** A pull request as the forge reports it, with the head commit it names (what a merge took in). */
export interface ForgePull extends PullRequest {
  headSha: string | null;
}

export interface ForgeAdapter {
  readonly kind: ForgeConfig['kind'];
  /** Open a pull request of head into base (branch names on the forge's repository). */
  openPullRequest(pr: { head: string; base: string; title: string; body: string }): Promise<ForgePull>;
  getPullRequest(number: number): Promise<ForgePull>;
  /**
   * The checks of a commit (a pull request's head): the combined commit status, and on GitHub its check runs too,
   * each as success, failure or pending, with the verdict and the counts.
   */
  getChecks(sha: string): Promise<PullRequestChecks>;
  /** The Authorization header for git over http(s) to this forge's host, or null when remoteUrl is elsewhere. */
  gitAuthHeader(remoteUrl: string): string | null;
}

const TIMEOUT_MS = 15_000;

function toPullRequest(body: unknown, what: string): ForgePull {
  const r = forgePullSchema.safeParse(body);
  if (!r.success) throw new GroveError('forge_failed', `${what}: the forge answered something that is not a pull request`);
  const p = r.data;
  const state = p.merged === true || (p.merged_at ?? null) !== null ? 'merged' : p.state === 'open' ? 'open' : 'closed';
  return { url: p.html_url, number: p.number, state, headSha: p.head?.sha ?? null };
}

/** A status (Gitea: success, pending, failure, error, warning; GitHub: success, pending, failure, error) as a check state. */
function statusState(state: string | null | undefined): CheckState {
  if (state === 'success') return 'success';
  if (state === 'pending' || state === null || state === undefined || state === '') return 'pending';
  // failure, error, warning, and anything new: not green, so nothing pretends it passed.
  return 'failure';
}

/** A GitHub check run: pending until completed, then green for success, neutral or skipped, red for the rest. */
function checkRunState(status: string | null | undefined, conclusion: string | null | undefined): CheckState {
  if (status !== 'completed') return 'pending';
  return conclusion === 'success' || conclusion === 'neutral' || conclusion === 'skipped' ? 'success' : 'failure';
}

/** The forge's text is shown in the dashboard as a link: only http(s) URLs pass (no javascript:, data:, ...). */
function safeUrl(u: string | null | undefined): string | null {
  if (!u) return null;
  try {
    const parsed = new URL(u);
    return parsed.protocol === 'https:' || parsed.protocol === 'http:' ? parsed.href : null;
  } catch {
    return null;
  }
}

const cut = (s: string, n: number) => (s.length > n ? `${s.slice(0, n - 1)}…` : s);

function check(name: string | null | undefined, state: CheckState, url: string | null | undefined, description: string | null | undefined): PullRequestCheck {
  return { name: cut(name?.trim() || 'unnamed check', 200), state, url: safeUrl(url), description: description ? cut(description, 500) : null };
}

/** The verdict over all checks: any failure fails, else anything running is pending, else success (none when empty). */
export function summarizeChecks(all: PullRequestCheck[]): PullRequestChecks {
  const checks = all.slice(0, MAX_CHECKS);
  const n = (s: CheckState) => all.filter((c) => c.state === s).length;
  const failure = n('failure');
  const pending = n('pending');
  const success = n('success');
  const state = all.length === 0 ? 'none' : failure > 0 ? 'failure' : pending > 0 ? 'pending' : 'success';
  return { state, total: all.length, success, failure, pending, checks };
}

/** A combined status answer's checks; a body that is not one is the forge's failure, never a crash. */
export function parseCombinedStatus(body: unknown, what: string): PullRequestCheck[] {
  const r = forgeCombinedStatusSchema.safeParse(body);
  if (!r.success) throw new GroveError('forge_failed', `${what}: the forge answered something that is not a commit status`);
  return (r.data.statuses ?? []).map((s) => check(s.context, statusState(s.state), s.target_url, s.description));
}

/** GitHub's check-runs answer as checks. */
export function parseCheckRuns(body: unknown, what: string): PullRequestCheck[] {
  const r = forgeCheckRunsSchema.safeParse(body);
  if (!r.success) throw new GroveError('forge_failed', `${what}: the forge answered something that is not a list of check runs`);
  return r.data.check_runs.map((c) => check(c.name, checkRunState(c.status, c.conclusion), c.html_url ?? c.details_url, null));
}

interface HttpForgeOptions {
  kind: ForgeConfig['kind'];
  /** Root of the REST API, without a trailing slash. */
  apiRoot: string;
  /** Hosts (host[:port]) whose git remotes take the token too. */
  gitHosts: string[];
  authorization: string;
  /** Basic credentials for git over http(s); forges take the token as the password. */
  gitBasic: string;
  owner: string;
  repo: string;
  token: string;
  extraHeaders?: Record<string, string>;
  /** GitHub also reports check runs (Actions) beside commit statuses. */
  checkRuns: boolean;
  fetch: typeof fetch;
}

class HttpForge implements ForgeAdapter {
  readonly kind: ForgeConfig['kind'];
  constructor(private readonly o: HttpForgeOptions) {
    this.kind = o.kind;
  }

  private scrub(text: string): string {
    return this.o.token ? text.split(this.o.token).join('***') : text;
  }

  private async call(method: 'GET' | 'POST', path: string, what: string, body?: unknown): Promise<unknown> {
    const url = `${this.o.apiRoot}/repos/${encodeURIComponent(this.o.owner)}/${encodeURIComponent(this.o.repo)}${path}`;
    let res: Response;
    try {
      res = await this.o.fetch(url, {
        method,
        headers: {
          authorization: this.o.authorization,
          accept: 'application/json',
          'user-agent': 'grove',
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          ...this.o.extraHeaders,
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(TIMEOUT_MS),
        redirect: 'error',
      });
    } catch (e) {
      const why = e instanceof Error ? (e.cause instanceof Error ? e.cause.message : e.message) : String(e);
      throw new GroveError('forge_failed', `${what}: the ${this.kind} API at ${this.o.apiRoot} could not be reached (${this.scrub(why)})`, {
        details: { reason: 'unreachable' },
      });
    }
    const text = await res.text();
    if (!res.ok) {
      let message = text.slice(0, 500);
      try {
        const parsed = JSON.parse(text) as { message?: unknown };
        if (typeof parsed.message === 'string') message = parsed.message;
      } catch {
        // Not JSON: the raw text (cut) says what happened.
      }
      const reason = res.status === 401 || res.status === 403 ? 'auth' : res.status === 404 ? 'not_found' : res.status === 409 || res.status === 422 ? 'conflict' : 'error';
      const hint =
        reason === 'auth'
          ? '; check GROVE_FORGE_TOKEN and its permissions'
          : reason === 'not_found'
            ? `; check forge.owner/forge.repo ("${this.o.owner}/${this.o.repo}") in the project config`
            : reason === 'conflict'
              ? '; a pull request for this branch may already exist on the forge'
              : '';
      throw new GroveError('forge_failed', `${what}: the ${this.kind} API answered ${res.status} (${this.scrub(message)})${hint}`, {
        details: { reason, status: res.status },
      });
    }
    try {
      return JSON.parse(text) as unknown;
    } catch {
      throw new GroveError('forge_failed', `${what}: the ${this.kind} API answered with something that is not JSON`);
    }
  }

  async openPullRequest(pr: { head: string; base: string; title: string; body: string }): Promise<ForgePull> {
    const what = `opening a pull request of ${pr.head} into ${pr.base}`;
    return toPullRequest(await this.call('POST', '/pulls', what, pr), what);
  }

  async getPullRequest(number: number): Promise<ForgePull> {
    const what = `reading pull request #${number}`;
    return toPullRequest(await this.call('GET', `/pulls/${number}`, what), what);
  }

  async getChecks(sha: string): Promise<PullRequestChecks> {
    // The sha goes into a path: only a hex object name.
    if (!/^[0-9a-f]{40,64}$/.test(sha)) throw new GroveError('invalid_input', `not a commit id: ${sha.slice(0, 80)}`);
    const what = `reading the checks of ${sha.slice(0, 10)}`;
    const checks = parseCombinedStatus(await this.call('GET', `/commits/${sha}/status?per_page=${MAX_CHECKS}`, what), what);
    if (this.o.checkRuns) checks.push(...parseCheckRuns(await this.call('GET', `/commits/${sha}/check-runs?per_page=${MAX_CHECKS}`, what), what));
    return summarizeChecks(checks);
  }

  gitAuthHeader(remoteUrl: string): string | null {
    let u: URL;
    try {
      u = new URL(remoteUrl);
    } catch {
      return null;
    }
    if (u.protocol !== 'https:' && u.protocol !== 'http:') return null;
    if (!this.o.gitHosts.includes(u.host)) return null;
    return `Authorization: Basic ${this.o.gitBasic}`;
  }
}

/** The adapter for a project's forge config; the token comes from the server (GROVE_FORGE_TOKEN). */
/** `fetch`: the HTTP client (tests give an in-memory one); the global fetch otherwise. */
export function createForge(config: ForgeConfig, token: string, o: { fetch?: typeof fetch } = {}): ForgeAdapter {
  const doFetch = o.fetch ?? ((input, init) => fetch(input, init));
  if (config.kind === 'gitea') {
    const root = new URL(config.baseUrl ?? '');
    const base = root.href.replace(/\/+$/, '');
    return new HttpForge({
      kind: 'gitea',
      apiRoot: `${base}/api/v1`,
      gitHosts: [root.host],
      authorization: `token ${token}`,
      gitBasic: Buffer.from(`grove:${token}`).toString('base64'),
      owner: config.owner,
      repo: config.repo,
      token,
      checkRuns: false,
      fetch: doFetch,
    });
  }
  const api = new URL(config.baseUrl ?? 'https://api.github.com');
  const apiRoot = api.href.replace(/\/+$/, '');
  // github.com's git host differs from its API host; Enterprise serves both from one host (<host>/api/v3).
  const gitHosts = api.host === 'api.github.com' ? ['github.com'] : [api.host];
  return new HttpForge({
    kind: 'github',
    apiRoot,
    gitHosts,
    authorization: `Bearer ${token}`,
    gitBasic: Buffer.from(`x-access-token:${token}`).toString('base64'),
    owner: config.owner,
    repo: config.repo,
    token,
    extraHeaders: { accept: 'application/vnd.github+json', 'x-github-api-version': '2022-11-28' },
    checkRuns: true,
    fetch: doFetch,
  });
}
