// What the host connects to before it trusts a backend socket: checked in @grove/runtime, used here and by the proxy.
export { verifyBackendSocket } from '@grove/runtime';
export type { SocketIdentity } from '@grove/runtime';
