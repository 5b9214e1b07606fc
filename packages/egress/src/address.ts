/**
 * Host parsing, IP normalization and address classification for the gate.
 *
 * Numeric hosts are read the way the URL standard (and so curl, browsers and most HTTP clients)
 * reads them, so `2130706433`, `0x7f000001`, `017700000001` and `127.1` are all 127.0.0.1 here too:
 * a gate that parsed them differently from the client would check one address and let the client
 * mean another.
 */

export interface Ip {
  family: 4 | 6;
  /** 4 or 16 bytes, network order. */
  bytes: Uint8Array;
  /** Canonical text: dotted quad, or RFC 5952 IPv6 (the form the URL standard serializes). */
  text: string;
}

export type ParsedHost = { kind: 'ip'; ip: Ip } | { kind: 'name'; name: string } | { kind: 'invalid'; why: string };

/** Address classes the gate refuses unless a rule names the address. `public` is the only one it allows by default. */
export type AddressClass =
  | 'public'
  | 'loopback'
  | 'private'
  | 'link-local'
  | 'metadata'
  | 'cgnat'
  | 'unique-local'
  | 'multicast'
  | 'unspecified'
  | 'reserved'
  | 'ipv4-compatible';

const NAME_CHARS = /^[a-z0-9._-]+$/;
const LABEL = /^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$/;

// ---- IPv4 ----

/** One part of a URL-standard IPv4 host: 0x.. hex, 0.. octal, else decimal. null when it is not a number. */
function ipv4Number(part: string): bigint | null {
  if (part === '') return null;
  let digits = part;
  let radix = 10;
  if (/^0x/i.test(part)) {
    digits = part.slice(2);
    radix = 16;
  } else if (part.length > 1 && part.startsWith('0')) {
    digits = part.slice(1);
    radix = 8;
  }
  if (digits === '') return 0n;
  const ok = radix === 16 ? /^[0-9a-f]+$/i : radix === 8 ? /^[0-7]+$/ : /^[0-9]+$/;
  if (!ok.test(digits)) return null;
  // Long inputs stay exact with BigInt; 2^32 needs at most 32 binary digits, so cap the work.
  if (digits.length > 40) return 1n << 64n;
  return radix === 10 ? BigInt(digits) : BigInt(`${radix === 16 ? '0x' : '0o'}${digits}`);
}

/** The URL standard's "ends in a number" test: decides whether a host is parsed as IPv4 at all. */
function endsInNumber(labels: string[]): boolean {
  const last = labels[labels.length - 1] ?? '';
  if (/^[0-9]+$/.test(last)) return true;
  return /^0x[0-9a-f]*$/i.test(last);
}

/** URL-standard IPv4 parser over dot-separated parts; null when the parts are not a valid address. */
function parseIpv4Parts(parts: string[]): Ip | null {
  if (parts.length === 0 || parts.length > 4) return null;
  const nums: bigint[] = [];
  for (const p of parts) {
    const n = ipv4Number(p);
    if (n === null) return null;
    nums.push(n);
  }
  const last = nums[nums.length - 1] ?? 0n;
  for (const n of nums.slice(0, -1)) if (n > 255n) return null;
  if (last >= 256n ** BigInt(5 - nums.length)) return null;
  let value = last;
  nums.slice(0, -1).forEach((n, i) => {
    value += n * 256n ** BigInt(3 - i);
  });
  const bytes = new Uint8Array(4);
  for (let i = 3; i >= 0; i--) {
    bytes[i] = Number(value & 0xffn);
    value >>= 8n;
  }
  return ipv4(bytes);
}

function ipv4(bytes: Uint8Array): Ip {
  return { family: 4, bytes, text: Array.from(bytes).join('.') };
}

// ---- IPv6 ----

function parseIpv6(text: string): Ip | null {
  if (!/^[0-9a-fA-F:.]+$/.test(text)) return null;
  let head = text;
  let v4: Uint8Array | null = null;
  // An embedded dotted IPv4 tail (::ffff:1.2.3.4) is four decimal parts, nothing looser.
  const lastColon = text.lastIndexOf(':');
  if (text.slice(lastColon + 1).includes('.')) {
    const tail = text.slice(lastColon + 1);
    if (!/^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/.test(tail)) return null;
    v4 = new Uint8Array(tail.split('.').map(Number));
    head = text.slice(0, lastColon + 1);
    // "::1.2.3.4" leaves "::"; "1::2:1.2.3.4" leaves "1::2:" whose trailing ':' stands for the tail.
    if (!head.endsWith('::')) head = head.slice(0, -1);
  }
  const groupsWanted = v4 ? 6 : 8;
  const halves = head.split('::');
  if (halves.length > 2) return null;
  const parse = (s: string): number[] | null => {
    if (s === '') return [];
    const out: number[] = [];
    for (const g of s.split(':')) {
      if (!/^[0-9a-fA-F]{1,4}$/.test(g)) return null;
      out.push(parseInt(g, 16));
    }
    return out;
  };
  const left = parse(halves[0] ?? '');
  const right = halves.length === 2 ? parse(halves[1] ?? '') : [];
  if (!left || !right) return null;
  let groups: number[];
  if (halves.length === 2) {
    const missing = groupsWanted - left.length - right.length;
    if (missing < 1) return null;
    groups = [...left, ...new Array<number>(missing).fill(0), ...right];
  } else {
    groups = left;
  }
  if (groups.length !== groupsWanted) return null;
  const bytes = new Uint8Array(16);
  groups.forEach((g, i) => {
    bytes[i * 2] = g >> 8;
    bytes[i * 2 + 1] = g & 0xff;
  });
  if (v4) bytes.set(v4, 12);
  return ipv6(bytes);
}

function ipv6(bytes: Uint8Array): Ip {
  return { family: 6, bytes, text: formatIpv6(bytes) };
}

/** RFC 5952: lowercase, no leading zeros, the first longest run (of two or more) of zero groups as "::". */
export function formatIpv6(bytes: Uint8Array): string {
  const groups: number[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(((bytes[i] ?? 0) << 8) | (bytes[i + 1] ?? 0));
  let bestStart = -1;
  let bestLen = 0;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen) {
      bestStart = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (bestLen < 2) return hex.join(':');
  return `${hex.slice(0, bestStart).join(':')}::${hex.slice(bestStart + bestLen).join(':')}`;
}

// ---- public API ----

/** An IP address as the resolver or a rule writes it (no brackets, no URL-style numeric forms). */
export function parseIp(text: string): Ip | null {
  if (text.includes(':')) return text.includes('%') ? null : parseIpv6(text);
  if (!/^\d{1,3}(\.\d{1,3}){3}$/.test(text)) return null;
  const parts = text.split('.').map(Number);
  if (parts.some((p) => p > 255)) return null;
  return ipv4(new Uint8Array(parts));
}

/**
 * A host as a client wrote it in a CONNECT target, an absolute URL or a Host header: an IP literal in
 * any notation (normalized), a hostname (lowercased, trailing dot dropped), or invalid with the reason.
 */
export function parseHost(raw: string): ParsedHost {
  if (raw.startsWith('[')) {
    if (!raw.endsWith(']')) return { kind: 'invalid', why: 'unterminated IPv6 literal' };
    const inner = raw.slice(1, -1);
    if (inner.includes('%')) return { kind: 'invalid', why: 'IPv6 zone ids are not allowed' };
    const ip = parseIpv6(inner);
    return ip ? { kind: 'ip', ip } : { kind: 'invalid', why: `"${raw}" is not a valid IPv6 address` };
  }
  if (raw.includes(':')) return { kind: 'invalid', why: 'IPv6 addresses must be written in brackets' };
  let h = raw.toLowerCase();
  if (h.endsWith('.')) h = h.slice(0, -1);
  if (h === '') return { kind: 'invalid', why: 'empty host' };
  if (h.length > 253) return { kind: 'invalid', why: 'host longer than 253 characters' };
  if (!NAME_CHARS.test(h)) return { kind: 'invalid', why: 'host has characters outside a-z, 0-9, ".", "-" and "_"' };
  const labels = h.split('.');
  if (endsInNumber(labels)) {
    const ip = parseIpv4Parts(labels);
    return ip ? { kind: 'ip', ip } : { kind: 'invalid', why: `"${raw}" ends in a number but is not a valid IPv4 address` };
  }
  if (labels.some((l) => !LABEL.test(l))) return { kind: 'invalid', why: `"${raw}" has an empty or malformed label` };
  return { kind: 'name', name: h };
}

function inV4(b: Uint8Array, prefix: readonly number[], bits: number): boolean {
  let left = bits;
  for (let i = 0; left > 0; i++, left -= 8) {
    const mask = left >= 8 ? 0xff : (0xff << (8 - left)) & 0xff;
    if (((b[i] ?? 0) & mask) !== ((prefix[i] ?? 0) & mask)) return false;
  }
  return true;
}

function classifyV4(b: Uint8Array): AddressClass {
  if (b[0] === 169 && b[1] === 254 && b[2] === 169 && b[3] === 254) return 'metadata';
  if (inV4(b, [0], 8)) return 'unspecified'; // 0.0.0.0/8 "this network": connect() to it reaches the host itself
  if (inV4(b, [127], 8)) return 'loopback';
  if (inV4(b, [10], 8) || inV4(b, [172, 16], 12) || inV4(b, [192, 168], 16)) return 'private';
  if (inV4(b, [169, 254], 16)) return 'link-local';
  if (inV4(b, [100, 64], 10)) return 'cgnat';
  if (inV4(b, [224], 4)) return 'multicast';
  if (
    inV4(b, [240], 4) || // reserved, includes 255.255.255.255
    inV4(b, [192, 0, 0], 24) || // IETF protocol assignments
    inV4(b, [192, 0, 2], 24) ||
    inV4(b, [198, 51, 100], 24) ||
    inV4(b, [203, 0, 113], 24) || // documentation
    inV4(b, [198, 18], 15) || // benchmarking
    inV4(b, [192, 88, 99], 24) // 6to4 relay anycast
  ) {
    return 'reserved';
  }
  return 'public';
}

function isZero(b: Uint8Array, from: number, to: number): boolean {
  for (let i = from; i < to; i++) if (b[i] !== 0) return false;
  return true;
}

/**
 * The IPv4 address an IPv6 address stands for, when it embeds one that a connection could end up at:
 * IPv4-mapped (::ffff:a.b.c.d), NAT64 (64:ff9b::a.b.c.d) and 6to4 (2002:aabb:ccdd::).
 */
export function embeddedIpv4(ip: Ip): { v4: Ip; via: 'ipv4-mapped' | 'nat64' | '6to4' } | null {
  if (ip.family !== 6) return null;
  const b = ip.bytes;
  if (isZero(b, 0, 10) && b[10] === 0xff && b[11] === 0xff) return { v4: ipv4(b.slice(12)), via: 'ipv4-mapped' };
  if (b[0] === 0x00 && b[1] === 0x64 && b[2] === 0xff && b[3] === 0x9b && isZero(b, 4, 12)) return { v4: ipv4(b.slice(12)), via: 'nat64' };
  if (b[0] === 0x20 && b[1] === 0x02) return { v4: ipv4(b.slice(2, 6)), via: '6to4' };
  return null;
}

/** IPv4-mapped addresses are connected to (and matched against rules) as the IPv4 address they carry. */
export function unmap(ip: Ip): Ip {
  const e = embeddedIpv4(ip);
  return e?.via === 'ipv4-mapped' ? e.v4 : ip;
}

export function classify(ip: Ip): AddressClass {
  if (ip.family === 4) return classifyV4(ip.bytes);
  const b = ip.bytes;
  if (isZero(b, 0, 16)) return 'unspecified';
  if (isZero(b, 0, 15) && b[15] === 1) return 'loopback';
  const embedded = embeddedIpv4(ip);
  if (embedded) {
    const c = classifyV4(embedded.v4.bytes);
    // A public IPv4 behind 6to4/NAT64 still goes through a relay we do not control: refuse those.
    if (c === 'public' && embedded.via !== 'ipv4-mapped') return 'reserved';
    return c;
  }
  if (isZero(b, 0, 12)) return 'ipv4-compatible'; // ::a.b.c.d, deprecated; some stacks still route it as IPv4
  const first = b[0] ?? 0;
  const second = b[1] ?? 0;
  if (first === 0xff) return 'multicast';
  if (first === 0xfe && (second & 0xc0) === 0x80) return 'link-local';
  if (first === 0xfe && (second & 0xc0) === 0xc0) return 'private'; // fec0::/10 site-local (deprecated)
  if ((first & 0xfe) === 0xfc) return 'unique-local';
  if (first === 0x20 && second === 0x01 && b[2] === 0x0d && b[3] === 0xb8) return 'reserved'; // documentation
  if (first === 0x20 && second === 0x01 && b[2] === 0x00 && b[3] === 0x00) return 'reserved'; // Teredo
  // Only global unicast (2000::/3) is public; everything else in IPv6 is reserved or special.
  if ((first & 0xe0) !== 0x20) return 'reserved';
  return 'public';
}

export function isLoopback(ip: Ip): boolean {
  return classify(unmap(ip)) === 'loopback';
}

/** host:port with brackets for IPv6, as used in messages and CONNECT lines. */
export function hostPort(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}
