// The proxy's HTTP framing: request targets, the headers forwarded each way, and the refusal a client reads.
import type { IncomingHttpHeaders, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { unmap } from './address.ts';
import type { ParsedHost } from './address.ts';
import type { Deny } from './decision.ts';

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'proxy-authenticate', 'proxy-authorization', 'te', 'trailer', 'transfer-encoding', 'upgrade']);

/** `host:port` (CONNECT target, absolute-URL authority, Host header) -> host and port, or why not. */
export function splitAuthority(authority: string, defaultPort: number | null): { host: string; port: number } | { error: string } {
  if (authority.includes('@')) return { error: 'credentials in the target are not allowed' };
  let host: string;
  let portText: string | null;
  if (authority.startsWith('[')) {
    const end = authority.indexOf(']');
    if (end < 0) return { error: 'unterminated IPv6 literal' };
    host = authority.slice(0, end + 1);
    const rest = authority.slice(end + 1);
    if (rest === '') portText = null;
    else if (rest.startsWith(':')) portText = rest.slice(1);
    else return { error: `unexpected "${rest}" after the IPv6 literal` };
  } else {
    const i = authority.lastIndexOf(':');
    host = i < 0 ? authority : authority.slice(0, i);
    portText = i < 0 ? null : authority.slice(i + 1);
    if (host.includes(':')) return { error: 'IPv6 addresses must be written in brackets' };
  }
  if (host === '') return { error: 'the target has no host' };
  if (portText === null) {
    if (defaultPort === null) return { error: 'the target has no port (CONNECT needs host:port)' };
    return { host, port: defaultPort };
  }
  if (!/^\d{1,5}$/.test(portText)) return { error: `"${portText}" is not a port` };
  const port = Number(portText);
  if (port < 1 || port > 65535) return { error: `port ${port} is outside 1-65535` };
  return { host, port };
}

/** One comparable key per host: the canonical address for IP literals (any notation), the lowercased name otherwise. */
export function hostKey(h: ParsedHost, raw: string): string {
  if (h.kind === 'ip') return unmap(h.ip).text;
  if (h.kind === 'name') return h.name;
  return `invalid:${raw}`;
}

export function forwardHeaders(h: IncomingHttpHeaders): OutgoingHttpHeaders {
  const listed = new Set(
    String(h.connection ?? '')
      .split(',')
      .map((s) => s.trim().toLowerCase())
      .filter(Boolean),
  );
  const out: OutgoingHttpHeaders = {};
  for (const [k, v] of Object.entries(h)) {
    if (v === undefined || HOP_BY_HOP.has(k) || listed.has(k)) continue;
    out[k] = v;
  }
  return out;
}

export function responseHeaders(raw: string[]): string[] {
  const listed = new Set<string>();
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i]?.toLowerCase() === 'connection') for (const t of (raw[i + 1] ?? '').split(',')) listed.add(t.trim().toLowerCase());
  }
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const k = raw[i] ?? '';
    const lower = k.toLowerCase();
    if (HOP_BY_HOP.has(lower) || listed.has(lower)) continue;
    out.push(k, raw[i + 1] ?? '');
  }
  return out;
}

function denyBody(d: Deny, host: string, port: number): string {
  return JSON.stringify({ code: d.code, message: `grove egress: ${d.reason} (rule: ${d.rule})`, rule: d.rule, host, port });
}

/** A refusal written on a raw socket (CONNECT, upgrade), then the socket is closed. */
export function writeRawDeny(socket: Duplex, d: Deny, host: string, port: number): void {
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  const body = denyBody(d, host, port);
  const text = d.status === 400 ? 'Bad Request' : d.status === 429 ? 'Too Many Requests' : d.status === 502 ? 'Bad Gateway' : 'Forbidden';
  socket.end(
    `HTTP/1.1 ${d.status} ${text}\r\ncontent-type: application/json\r\nx-grove-egress-rule: ${d.rule}\r\n` +
      `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}

/** A refusal as the response of a plain-HTTP request; cut instead once a response has begun. */
export function writeHttpDeny(res: ServerResponse, d: Deny, host: string, port: number): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = denyBody(d, host, port);
  res.writeHead(d.status, { 'content-type': 'application/json', 'x-grove-egress-rule': d.rule, 'content-length': Buffer.byteLength(body), connection: 'close' });
  res.end(body);
}
