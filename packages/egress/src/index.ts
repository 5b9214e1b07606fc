// @grove/egress: the egress gate (a per-workspace CONNECT/HTTP proxy on a Unix socket that decides on the host, with policy matching and audit) and, beside it, the credential relay to the provider API.
export { createGate, splitAuthority } from './gate.ts';
export type { AuditSink, Connector, ConnectTarget, Gate, GateOptions } from './gate.ts';
export { classify, embeddedIpv4, formatIpv6, hostPort, isLoopback, parseHost, parseIp, unmap } from './address.ts';
export type { AddressClass, Ip, ParsedHost } from './address.ts';
export { matchAddress, matchName } from './policy.ts';
export type { NameMatch } from './policy.ts';
export { staticResolver, systemResolver } from './resolver.ts';
export type { Resolver } from './resolver.ts';
export { createProviderRelay, removeStaleSocket, RELAY_LIMITS, RELAY_ROUTES, RELAY_MAX_BODY } from './provider-relay.ts';
export type { ProviderRelay, ProviderRelayOptions, RelayRecord, RelayRoute } from './provider-relay.ts';
export { createBoundedServer } from './listener-limits.ts';
export type { BoundedServer, ListenerLimits } from './listener-limits.ts';
