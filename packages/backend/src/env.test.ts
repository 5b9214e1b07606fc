import { describe, expect, it } from 'vitest';
// The driver's constants, read straight from the file (no dependency on the package and its Docker driver).
import { SANDBOX_PATHS } from '../../sandbox/src/types.ts';
import { ENV_DEFAULTS, agentEnv, readClaimedEnv, readEnv, readPoolEnv } from './env.ts';

describe('readEnv', () => {
  it('applies the defaults, which match the sandbox driver mounts', () => {
    expect(readEnv({ GROVE_SLUG: 'demo' })).toEqual({
      socketPath: '/run/grove/backend.sock',
      threadDir: '/var/lib/grove/thread',
      workspaceDir: '/workspace',
      slug: 'demo',
      provider: 'scripted',
      scriptedDelayMs: 25,
      hostHookSocket: '/run/grove/host.sock',
      providerRelaySocket: '/run/grove/provider.sock',
      providerRelayPort: 3129,
      egressSocket: '/run/grove/egress.sock',
      egressPort: 3128,
      agentUser: null,
      ptyHelper: '/opt/grove/grove-pty',
    });
    expect(ENV_DEFAULTS.GROVE_SOCKET).toBe(SANDBOX_PATHS.socket);
    expect(ENV_DEFAULTS.GROVE_EGRESS_SOCKET).toBe(`${SANDBOX_PATHS.run}/egress.sock`);
    expect(ENV_DEFAULTS.GROVE_THREAD_DIR).toBe(SANDBOX_PATHS.thread);
    expect(ENV_DEFAULTS.GROVE_WORKSPACE_DIR).toBe(SANDBOX_PATHS.workspace);
  });

  it('reads every variable and treats empty strings as unset', () => {
    expect(
      readEnv({
        GROVE_SOCKET: '/tmp/x.sock',
        GROVE_THREAD_DIR: '/tmp/t',
        GROVE_WORKSPACE_DIR: '',
        GROVE_SLUG: 'proj~feature-1',
        GROVE_PROVIDER: 'scripted',
        GROVE_SCRIPTED_DELAY_MS: '0',
        GROVE_EGRESS_SOCKET: '/tmp/e.sock',
        GROVE_EGRESS_PORT: '8888',
      }),
    ).toMatchObject({ socketPath: '/tmp/x.sock', threadDir: '/tmp/t', workspaceDir: '/workspace', slug: 'proj~feature-1', scriptedDelayMs: 0, egressSocket: '/tmp/e.sock', egressPort: 8888 });
    expect(readEnv({ GROVE_SLUG: 'demo', GROVE_SCRIPTED_DELAY_MS: '' }).scriptedDelayMs).toBe(25);
  });

  it.each([
    [{}, /GROVE_SLUG: GROVE_SLUG is required/],
    [{ GROVE_SLUG: 'Bad Slug' }, /GROVE_SLUG: slug must be/],
    [{ GROVE_SLUG: 'demo', GROVE_PROVIDER: 'codex' }, /GROVE_PROVIDER must be one of: scripted, claude, command/],
    [{ GROVE_SLUG: 'demo', GROVE_SCRIPTED_DELAY_MS: 'fast' }, /GROVE_SCRIPTED_DELAY_MS must be a number/],
    [{ GROVE_SLUG: 'demo', GROVE_SCRIPTED_DELAY_MS: '-5' }, /must not be negative/],
    [{ GROVE_SLUG: 'demo', GROVE_SOCKET: 'relative.sock' }, /GROVE_SOCKET must be an absolute path/],
    [{ GROVE_SLUG: 'demo', GROVE_EGRESS_PORT: '0' }, /GROVE_EGRESS_PORT must be between 1 and 65535/],
    [{ GROVE_SLUG: 'demo', GROVE_EGRESS_SOCKET: 'egress.sock' }, /GROVE_EGRESS_SOCKET must be an absolute path/],
  ])('rejects %j', (env, message) => {
    expect(() => readEnv(env)).toThrow(message);
  });

  it('takes the provider from GROVE_AGENT_CONFIG and refuses a config that does not parse or disagrees', () => {
    const agent = { provider: 'command', argv: ['aider', '--message', '{message}'] };
    expect(readEnv({ GROVE_SLUG: 'demo', GROVE_AGENT_CONFIG: JSON.stringify(agent) })).toMatchObject({
      provider: 'command',
      agent: { ...agent, input: 'argument', env: {}, providerRelay: false },
    });
    expect(() => readEnv({ GROVE_SLUG: 'demo', GROVE_AGENT_CONFIG: '{' })).toThrow(/GROVE_AGENT_CONFIG is not valid JSON/);
    expect(() => readEnv({ GROVE_SLUG: 'demo', GROVE_AGENT_CONFIG: '{"provider":"codex"}' })).toThrow(/unknown agent provider/);
    expect(() => readEnv({ GROVE_SLUG: 'demo', GROVE_PROVIDER: 'claude', GROVE_AGENT_CONFIG: JSON.stringify(agent) })).toThrow(/GROVE_PROVIDER is "claude" but GROVE_AGENT_CONFIG configures "command"/);
  });

  it('gives agents the environment without Grove variables', () => {
    expect(agentEnv({ PATH: '/bin', GROVE_SLUG: 'demo', GROVE_AGENT_CONFIG: '{}', HTTPS_PROXY: 'http://127.0.0.1:3128', EMPTY: undefined })).toEqual({ PATH: '/bin', HTTPS_PROXY: 'http://127.0.0.1:3128' });
  });
});

describe('readPoolEnv', () => {
  it('is null for an ordinary backend', () => {
    expect(readPoolEnv({ GROVE_SLUG: 'demo' })).toBeNull();
    expect(readPoolEnv({ GROVE_POOL: '', GROVE_SLUG: 'demo' })).toBeNull();
  });

  it('reads the pool id and the socket; the socket is the backend alone when an agent user is set', () => {
    expect(readPoolEnv({ GROVE_POOL: '0123456789ab' })).toEqual({ pool: '0123456789ab', socketPath: '/run/grove/backend.sock', socketMode: 0o666 });
    expect(readPoolEnv({ GROVE_POOL: '0123456789ab', GROVE_SOCKET: '/tmp/b.sock', GROVE_AGENT_UID: '1000' })).toMatchObject({ socketPath: '/tmp/b.sock', socketMode: 0o600 });
  });

  it('refuses a bad id and a slug beside it: a warm sandbox has one identity, given at its claim', () => {
    expect(() => readPoolEnv({ GROVE_POOL: '../x' })).toThrow(/GROVE_POOL/);
    expect(() => readPoolEnv({ GROVE_POOL: '0123456789ab', GROVE_SLUG: 'demo' })).toThrow(/exclusive/);
  });

  it('gives a claimed backend the slug of its claim and the rest of its own environment', () => {
    expect(readClaimedEnv('demo~a', { GROVE_POOL: '0123456789ab', GROVE_SCRIPTED_DELAY_MS: '0' })).toMatchObject({ slug: 'demo~a', scriptedDelayMs: 0 });
    expect(() => readClaimedEnv('../x', { GROVE_POOL: '0123456789ab' })).toThrow(/GROVE_SLUG/);
  });
});
