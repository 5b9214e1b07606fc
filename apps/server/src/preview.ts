// Previews on their own origin. A page the agent builds is untrusted code: served from the dashboard's origin its
// scripts could call /api and /w/<other>/ with the user's cookie. So the dashboard's /w/<slug>/preview/<port>/
// only redirects to a second listener (another port, so another origin), which serves nothing but
// /pv/<cap>/<slug>/<port>/…, authorized by <cap>: an HMAC of the slug under the server's token.
import crypto from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { GroveError, previewPortParamSchema, slugSchema } from '@grove/contracts';
import { COOKIE_NAME } from './auth.ts';
import type { ProxyTarget } from './proxy.ts';

/** The capability of one workspace's previews: stable for a token and a slug, unguessable for another slug. */
export function previewCap(token: string, slug: string): string {
  return crypto.createHmac('sha256', token).update(`grove-preview:${slug}`).digest('base64url');
}

export function previewCapMatches(token: string, slug: string, cap: string): boolean {
  const want = Buffer.from(previewCap(token, slug));
  const got = Buffer.from(cap);
  return got.length === want.length && crypto.timingSafeEqual(got, want);
}

const PV_PATH = /^\/pv\/([^/?#]*)\/([^/?#]*)\/([^/?#]*)(\/[^?#]*)?(\?.*)?$/;

function decode(part: string): string | undefined {
  try {
    return decodeURIComponent(part);
  } catch {
    return undefined;
  }
}

const NOT_HERE = (url: string) => new GroveError('not_found', `no preview at ${url.split('?')[0] ?? url}: open previews from the Grove dashboard (/w/<slug>/preview/<port>/)`);

/**
 * /pv/<cap>/<slug>/<port>[/rest][?q] on the preview listener → the workspace backend's /preview/<port>[/rest][?q],
 * mounted at /pv/<cap>/<slug>. Slug and port are checked with the contracts schemas and the cap against the
 * token before anything is built from them; every failure is the same 404, so nothing tells which part was wrong.
 */
export function parsePreviewListenerPath(url: string, token: string): ProxyTarget {
  const m = PV_PATH.exec(url);
  if (!m) throw NOT_HERE(url);
  const slug = slugSchema.safeParse(decode(m[2] ?? ''));
  const port = previewPortParamSchema.safeParse(m[3]);
  if (!slug.success || !port.success || !previewCapMatches(token, slug.data, m[1] ?? '')) throw NOT_HERE(url);
  return { slug: slug.data, path: `/preview/${port.data}${m[4] ?? ''}${m[5] ?? ''}`, prefix: `/pv/${m[1]}/${slug.data}` };
}

const PREVIEW_REST = /^\/preview(?:\/([^/?#]*)(\/[^?#]*)?)?(\?.*)?$/;

/** The backend path /preview/<port>[/rest][?q] of a /w/<slug>/ request, or null when it is not a preview path. */
export function previewRest(backendPath: string): { port: number; rest: string; query: string } | null {
  const m = PREVIEW_REST.exec(backendPath);
  if (!m) return null;
  const port = previewPortParamSchema.safeParse(m[1] ?? '');
  if (!port.success) {
    throw new GroveError('invalid_input', `"${m[1] ?? ''}" is not a port: preview URLs are /w/<slug>/preview/<port>/ with a port between 1 and 65535`);
  }
  return { port: port.data, rest: m[2] ?? '', query: m[3] ?? '' };
}

/**
 * Where previews are served: GROVE_PREVIEW_URL's origin when set (a reverse proxy), else the host the request
 * came to with the preview listener's port. Refused when that is the dashboard's own origin: serving previews
 * there is exactly what this listener exists to prevent.
 */
export function previewOrigin(requestHost: string | undefined, opts: { configured?: string | undefined; port: number | undefined }): string {
  const host = requestHost ?? '';
  let origin: string;
  if (opts.configured) {
    origin = new URL(opts.configured).origin;
  } else {
    if (opts.port === undefined) throw new GroveError('internal', 'the preview listener is not listening');
    let hostname: string;
    try {
      hostname = new URL(`http://${host}`).hostname;
    } catch {
      throw new GroveError('invalid_input', `the Host header "${host}" is not a host`);
    }
    if (!hostname) throw new GroveError('invalid_input', 'a preview redirect needs a Host header');
    origin = `http://${hostname}:${opts.port}`;
  }
  if (new URL(origin).host === host) {
    throw new GroveError('internal', `the preview origin ${origin} is the dashboard's own origin; set GROVE_PREVIEW_URL (or GROVE_PREVIEW_PORT) to another origin`);
  }
  return origin;
}

/** The preview origin's address of a workspace's port: what /w/<slug>/preview/<port>/ redirects to, and what the dashboard frames. */
export function previewUrlOf(origin: string, token: string, slug: string, port: number, rest = '/', query = ''): string {
  return `${origin}/pv/${previewCap(token, slug)}/${slug}/${port}${rest}${query}`;
}

/**
 * What a preview response may not carry: a Set-Cookie for Grove's token cookie (cookies ignore ports, so the
 * preview origin could otherwise shadow the dashboard's), Service-Worker-Allowed (a worker scoped beyond its own
 * /pv/<cap>/<slug>/ would see other workspaces' previews on this origin); and the cap in the URL must not leave
 * in a Referer.
 */
export function scrubPreviewResponse(headers: IncomingHttpHeaders): void {
  delete headers['service-worker-allowed'];
  const cookies = headers['set-cookie'];
  if (cookies) {
    const kept = cookies.filter((c) => c.split('=')[0]?.trim() !== COOKIE_NAME);
    if (kept.length) headers['set-cookie'] = kept;
    else delete headers['set-cookie'];
  }
  headers['referrer-policy'] = 'no-referrer';
}
