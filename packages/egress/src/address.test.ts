// Host parsing and classification, checked against the WHATWG URL parser (what clients do) as the oracle.
import { isIPv6 } from 'node:net';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalRuleHost, egressPolicySchema, formatEgressRule } from '@grove/contracts';
import { classify, formatIpv6, parseHost, parseIp, unmap } from './address.ts';
import type { AddressClass } from './address.ts';
import { matchAddress, matchName } from './policy.ts';

/** What a URL-standard client would connect to for this host, or null when it refuses the host. */
function urlHost(raw: string): string | null {
  try {
    const h = new URL(`http://${raw}/`).hostname;
    return h;
  } catch {
    return null;
  }
}

function hostOf(raw: string): string {
  const p = parseHost(raw);
  if (p.kind === 'ip') return p.ip.family === 6 ? `[${p.ip.text}]` : p.ip.text;
  if (p.kind === 'name') return p.name;
  return 'invalid';
}

describe('parseHost', () => {
  it.each([
    ['2130706433', '127.0.0.1'],
    ['0x7f000001', '127.0.0.1'],
    ['0X7F000001', '127.0.0.1'],
    ['017700000001', '127.0.0.1'],
    ['127.1', '127.0.0.1'],
    ['127.0.1', '127.0.0.1'],
    ['0177.0.0.1', '127.0.0.1'],
    ['0x7f.1', '127.0.0.1'],
    ['127.0.0.1.', '127.0.0.1'],
    ['0', '0.0.0.0'],
    ['0x', '0.0.0.0'],
    ['192.168.257', '192.168.1.1'],
    ['4294967295', '255.255.255.255'],
    ['[::ffff:127.0.0.1]', '[::ffff:7f00:1]'],
    ['[0:0:0:0:0:0:0:1]', '[::1]'],
    ['[::]', '[::]'],
    ['[FE80::1]', '[fe80::1]'],
    ['Example.COM.', 'example.com'],
    ['a_b.example', 'a_b.example'],
  ])('%s -> %s', (raw, want) => {
    expect(hostOf(raw)).toBe(want);
  });

  it.each(['1.2.3.4.5', '0x100000000', '4294967296', '256.0.0.1', '08.0.0.1', '1.2.3.09', 'foo.123', '[fe80::1%25eth0]', '[::1', '::1', '', '.', 'a..b', 'exa mple.com', 'ex%41mple.com', '-a.com', 'a-.com', `${'a'.repeat(64)}.com`])(
    'refuses %j',
    (raw) => {
      expect(parseHost(raw).kind).toBe('invalid');
    },
  );

  it('reads every numeric host exactly like the URL standard does', () => {
    const part = fc.oneof(
      fc.nat({ max: 300 }).map(String),
      fc.nat({ max: 0xffffffff }).map(String),
      fc.nat({ max: 0xffffffff }).map((n) => `0x${n.toString(16)}`),
      fc.nat({ max: 0xffffffff }).map((n) => `0${n.toString(8)}`),
      fc.constantFrom('0x', '0', '00', '09', '0xg', '1e3', ''),
    );
    fc.assert(
      fc.property(fc.array(part, { minLength: 1, maxLength: 5 }), (parts) => {
        const raw = parts.join('.');
        const ours = parseHost(raw);
        const theirs = urlHost(raw);
        if (ours.kind === 'ip') expect(ours.ip.text, raw).toBe(theirs);
        // Where we refuse, a URL client either refuses too or reads a non-numeric name (never an address we did not check).
        else if (theirs !== null) expect(/^\d+\.\d+\.\d+\.\d+$/.test(theirs), raw).toBe(false);
      }),
      { numRuns: 2_000 },
    );
  });

  it('formats IPv6 exactly like the URL standard (RFC 5952)', () => {
    const group = fc.oneof(fc.constant(0), fc.constant(0), fc.integer({ min: 0, max: 0xffff }));
    fc.assert(
      fc.property(fc.array(group, { minLength: 8, maxLength: 8 }), (groups) => {
        const bytes = new Uint8Array(16);
        groups.forEach((g, i) => {
          bytes[i * 2] = g >> 8;
          bytes[i * 2 + 1] = g & 0xff;
        });
        const text = formatIpv6(bytes);
        expect(isIPv6(text)).toBe(true);
        expect(`[${text}]`).toBe(urlHost(`[${groups.map((g) => g.toString(16)).join(':')}]`));
        expect(parseIp(text)?.text).toBe(text);
      }),
      { numRuns: 1_000 },
    );
  });
});

describe('classify', () => {
  const cases: Array<[string, AddressClass]> = [
    ['8.8.8.8', 'public'],
    ['93.184.216.34', 'public'],
    ['127.0.0.1', 'loopback'],
    ['127.255.255.254', 'loopback'],
    ['0.0.0.0', 'unspecified'],
    ['0.1.2.3', 'unspecified'],
    ['10.255.0.1', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['172.32.0.1', 'public'],
    ['192.168.0.1', 'private'],
    ['169.254.169.254', 'metadata'],
    ['169.254.1.1', 'link-local'],
    ['100.64.0.1', 'cgnat'],
    ['100.127.255.255', 'cgnat'],
    ['100.128.0.1', 'public'],
    ['224.0.0.1', 'multicast'],
    ['239.255.255.255', 'multicast'],
    ['240.0.0.1', 'reserved'],
    ['255.255.255.255', 'reserved'],
    ['192.0.2.1', 'reserved'],
    ['198.18.0.1', 'reserved'],
    ['2606:4700::1111', 'public'],
    ['::1', 'loopback'],
    ['::', 'unspecified'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:8.8.8.8', 'public'],
    ['::ffff:10.0.0.1', 'private'],
    ['::127.0.0.1', 'ipv4-compatible'],
    ['::8.8.8.8', 'ipv4-compatible'],
    ['64:ff9b::a9fe:a9fe', 'metadata'],
    ['64:ff9b::808:808', 'reserved'],
    ['2002:c0a8:101::1', 'private'],
    ['fe80::1', 'link-local'],
    ['febf::1', 'link-local'],
    ['fec0::1', 'private'],
    ['fc00::1', 'unique-local'],
    ['fdff::1', 'unique-local'],
    ['ff02::1', 'multicast'],
    ['2001:db8::1', 'reserved'],
    ['2001::1', 'reserved'],
    ['100::1', 'reserved'],
    ['4000::1', 'reserved'],
  ];
  it.each(cases)('%s is %s', (text, want) => {
    const ip = parseIp(text);
    expect(ip).not.toBeNull();
    expect(classify(ip!)).toBe(want);
  });

  it('unmaps IPv4-mapped addresses to the IPv4 address they carry', () => {
    expect(unmap(parseIp('::ffff:10.1.2.3')!).text).toBe('10.1.2.3');
    expect(unmap(parseIp('::1')!).text).toBe('::1');
  });
});

describe('policy rules', () => {
  const policy = egressPolicySchema.parse({
    rules: [
      { host: 'API.Example.com.', ports: [443, 443, 80] },
      { host: '*.pkg.example', ports: [443] },
      { host: '127.0.0.1', ports: [8080] },
      { host: '[2001:DB8::1]', ports: [443] },
    ],
  });

  it('canonicalizes hosts and ports', () => {
    expect(policy.rules.map(formatEgressRule)).toEqual(['api.example.com:80,443', '*.pkg.example:443', '127.0.0.1:8080', '[2001:db8::1]:443']);
  });

  it('matches exact names, *.suffix subdomains (not the apex), and ports', () => {
    expect(matchName(policy, 'api.example.com', 443).ok).toBe(true);
    expect(matchName(policy, 'api.example.com', 22)).toMatchObject({ ok: false, deny: 'port-not-allowed' });
    expect(matchName(policy, 'a.b.pkg.example', 443).ok).toBe(true);
    expect(matchName(policy, 'pkg.example', 443)).toMatchObject({ ok: false, deny: 'not-in-policy' });
    expect(matchName(policy, 'evilpkg.example', 443)).toMatchObject({ ok: false, deny: 'not-in-policy' });
    expect(matchName(policy, '127.0.0.1', 8080).ok).toBe(false); // IP rules never match names
    expect(matchAddress(policy, '127.0.0.1', 8080).ok).toBe(true);
    expect(matchAddress(policy, '2001:db8::1', 443).ok).toBe(true);
  });

  it.each([
    ['', /must not be empty/],
    ['*.com', /at least two labels/],
    ['*', /wildcard is only allowed/],
    ['a.*.com', /wildcard is only allowed/],
    ['127.1', /looks like an IP address/],
    ['0x7f000001', /looks like an IP address/],
    ['010.0.0.1', /looks like an IP address/],
    ['256.1.1.1', /looks like an IP address/],
    ['[::ffff:127.0.0.1]', /IPv4-mapped/],
    ['::127.0.0.1', /IPv4-mapped or IPv4-compatible/],
    ['fe80::1%eth0', /zone ids/],
    ['exa mple.com', /not a hostname/],
    ['-a.com', /not a hostname/],
    ['http://a.com', /not a/],
  ])('refuses rule host %j', (host, message) => {
    const r = canonicalRuleHost(host);
    expect('error' in r && r.error).toMatch(message);
  });

  it.each([[[0]], [[65536]], [[1.5]], [[]], [['443']]])('refuses ports %j', (ports) => {
    expect(egressPolicySchema.safeParse({ rules: [{ host: 'a.com', ports }] }).success).toBe(false);
  });

  it('refuses unknown fields', () => {
    expect(egressPolicySchema.safeParse({ rules: [], mode: 'open' }).success).toBe(false);
    expect(egressPolicySchema.safeParse({ rules: [{ host: 'a.com', ports: [443], allowPrivate: true }] }).success).toBe(false);
  });
});
