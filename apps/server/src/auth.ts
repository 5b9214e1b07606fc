// Access control for the front door: one token (cookie or bearer) on every route but /api/health,
// and an Origin check on writes and WebSocket upgrades so another site cannot ride the cookie.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { IncomingMessage } from 'node:http';
import { GroveError } from '@grove/contracts';

export const COOKIE_NAME = 'grove_token';

/** GROVE_TOKEN when set; otherwise the token generated at first start and kept (0600) under GROVE_HOME. */
export function loadOrCreateToken(opts: { home: string; fromEnv?: string | undefined }): string {
  if (opts.fromEnv) return opts.fromEnv;
  const file = path.join(opts.home, 'token');
  try {
    const existing = fs.readFileSync(file, 'utf8').trim();
    if (existing.length >= 16) return existing;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
  fs.mkdirSync(opts.home, { recursive: true, mode: 0o700 });
  const token = crypto.randomBytes(24).toString('base64url');
  fs.writeFileSync(file, `${token}\n`, { mode: 0o600 });
  return token;
}

// One-shot hash: about half the cost of a Hash object, and it runs on every request.
const sha256 = (s: string): Buffer => crypto.hash('sha256', s, 'buffer');

// The server's token is one string for its whole life: its digest is made once, not on every request.
let known: { token: string; digest: Buffer } | null = null;

/** Constant time in the candidate's content and length (both sides are compared as SHA-256 digests). */
function safeEqual(candidate: string, token: string): boolean {
  if (known?.token !== token) known = { token, digest: sha256(token) };
  return crypto.timingSafeEqual(sha256(candidate), known.digest);
}

/** Every value of the cookie `name`, in the order the browser sent them (a cookie may be there more than once). */
export function readCookies(header: string | undefined, name: string): string[] {
  if (!header) return [];
  const out: string[] = [];
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0 || part.slice(0, eq).trim() !== name) continue;
    try {
      out.push(decodeURIComponent(part.slice(eq + 1).trim()));
    } catch {
      // not percent-encoding: not a token
    }
  }
  return out;
}

/**
 * The bearer token, else every value of the token cookie. All values count: cookies ignore ports, so a page on
 * the preview origin can set a second grove_token (Path=/api, say) that the browser sends first; it must not
 * lock the user out.
 */
export function presentedTokens(req: IncomingMessage): string[] {
  const auth = req.headers.authorization;
  if (auth?.startsWith('Bearer ')) return [auth.slice('Bearer '.length).trim()];
  return readCookies(req.headers.cookie, COOKIE_NAME);
}

export function isAuthorized(req: IncomingMessage, token: string): boolean {
  // Every candidate is compared (no early exit), each in constant time.
  return presentedTokens(req).reduce((ok, t) => safeEqual(t, token) || ok, false);
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * A request with an Origin header must come from this very host. Requests without one (curl, the CLI)
 * still need the token, which a browser on a foreign site cannot read.
 */
export function checkOrigin(req: IncomingMessage, opts: { upgrade: boolean }): void {
  if (!opts.upgrade && SAFE_METHODS.has(req.method ?? 'GET')) return;
  const origin = req.headers.origin;
  if (origin === undefined) return;
  let host: string;
  try {
    host = new URL(origin).host;
  } catch {
    throw new GroveError('forbidden_origin', `Origin "${origin}" is not a valid origin`);
  }
  if (host !== req.headers.host) {
    throw new GroveError('forbidden_origin', `requests from origin "${origin}" are refused; open Grove at http://${req.headers.host ?? 'its own address'}`);
  }
}

/** Throws unauthorized / forbidden_origin; returns nothing when the request may pass. */
export function authorize(req: IncomingMessage, opts: { token: string; upgrade: boolean }): void {
  if (!isAuthorized(req, opts.token)) {
    throw new GroveError('unauthorized', 'a Grove token is required: open the URL printed at start (/login?token=…) or send Authorization: Bearer <token>');
  }
  checkOrigin(req, { upgrade: opts.upgrade });
}

export function loginCookie(token: string): string {
  return `${COOKIE_NAME}=${encodeURIComponent(token)}; HttpOnly; SameSite=Strict; Path=/; Max-Age=31536000`;
}

export function tokenMatches(candidate: string | null | undefined, token: string): boolean {
  return typeof candidate === 'string' && safeEqual(candidate, token);
}
