// @grove/egress: the egress gate, a per-workspace CONNECT/HTTP proxy on a Unix socket that decides on the host, with policy matching and audit.
export { createGate, splitAuthority } from './gate.ts';
export type { AuditSink, Connector, ConnectTarget, Gate, GateOptions } from './gate.ts';
export { classify, embeddedIpv4, formatIpv6, hostPort, isLoopback, parseHost, parseIp, unmap } from './address.ts';
export type { AddressClass, Ip, ParsedHost } from './address.ts';
export { matchAddress, matchName } from './policy.ts';
export type { NameMatch } from './policy.ts';
export { staticResolver, systemResolver } from './resolver.ts';
export type { Resolver } from './resolver.ts';
