// The server's env.ts: GROVE_IDLE_STOP's duration forms and ways off, the preview listener's settings, GROVE_RUNTIME.
import { describe, expect, it } from 'vitest';
import { defaultMaxRunning, loadEnv } from './env.ts';

const idle = (v?: string) => loadEnv({ GROVE_HOME: '/tmp/grove-env-test', ...(v === undefined ? {} : { GROVE_IDLE_STOP: v }) }).GROVE_IDLE_STOP;

describe('GROVE_IDLE_STOP', () => {
  it('defaults to 30 minutes', () => {
    expect(idle()).toBe(30 * 60_000);
  });

  it('reads 30m, 90s, 1h, 500ms and bare milliseconds', () => {
    expect(idle('30m')).toBe(1_800_000);
    expect(idle('90s')).toBe(90_000);
    expect(idle('1h')).toBe(3_600_000);
    expect(idle('500ms')).toBe(500);
    expect(idle('2500')).toBe(2500);
  });

  it('is disabled by 0 and off', () => {
    expect(idle('0')).toBe(0);
    expect(idle('OFF')).toBe(0);
  });

  it('refuses anything else, naming the variable', () => {
    expect(() => idle('soon')).toThrow(/GROVE_IDLE_STOP: expected a duration/);
    expect(() => idle('-5m')).toThrow(/GROVE_IDLE_STOP/);
  });
});

describe('the preview listener settings', () => {
  it('defaults to the next port, or an ephemeral one when GROVE_PORT is', () => {
    expect(loadEnv({}).GROVE_PREVIEW_PORT).toBe(4301);
    expect(loadEnv({ GROVE_PORT: '8080' }).GROVE_PREVIEW_PORT).toBe(8081);
    expect(loadEnv({ GROVE_PORT: '0' }).GROVE_PREVIEW_PORT).toBe(0);
    expect(loadEnv({ GROVE_PREVIEW_PORT: '9000' }).GROVE_PREVIEW_PORT).toBe(9000);
  });

  it('refuses the dashboard port, a default past 65535 and a preview URL with a path', () => {
    expect(() => loadEnv({ GROVE_PORT: '4300', GROVE_PREVIEW_PORT: '4300' })).toThrow(/must differ from GROVE_PORT/);
    expect(() => loadEnv({ GROVE_PORT: '65535' })).toThrow(/set GROVE_PREVIEW_PORT/);
    expect(() => loadEnv({ GROVE_PREVIEW_URL: 'https://preview.example/x' })).toThrow(/without a path/);
    expect(() => loadEnv({ GROVE_PREVIEW_URL: 'ftp://preview.example' })).toThrow(/http\(s\) URL/);
    expect(loadEnv({ GROVE_PREVIEW_URL: 'https://preview.example:8443/' }).GROVE_PREVIEW_URL).toBe('https://preview.example:8443/');
  });
});

describe('DATABASE_URL', () => {
  const url = (v?: string) => loadEnv({ GROVE_HOME: '/tmp/grove-env-test', ...(v === undefined ? {} : { DATABASE_URL: v }) }).DATABASE_URL;

  it('is optional: unset or empty means SQLite in GROVE_HOME', () => {
    expect(url()).toBeUndefined();
    expect(url('')).toBeUndefined();
    expect(url('  ')).toBeUndefined();
  });

  it('takes postgres:// and postgresql:// URLs, a socket directory too', () => {
    expect(url('postgres://grove:secret@db.internal:5432/grove')).toBe('postgres://grove:secret@db.internal:5432/grove');
    expect(url('postgresql://grove@/grove?host=/run/postgresql')).toBe('postgresql://grove@/grove?host=/run/postgresql');
  });

  it('refuses anything else, naming the variable and never echoing the value', () => {
    let message = '';
    try {
      url('mysql://root:hunter2@db/grove');
    } catch (e) {
      message = (e as Error).message;
    }
    expect(message).toMatch(/DATABASE_URL: DATABASE_URL must be a postgres:\/\//);
    expect(message).not.toContain('hunter2');
  });
});

describe('GROVE_DISK_QUOTA and GROVE_INODE_QUOTA', () => {
  const disk = (v?: string) => loadEnv({ GROVE_HOME: '/tmp/grove-env-test', ...(v === undefined ? {} : { GROVE_DISK_QUOTA: v }) }).GROVE_DISK_QUOTA;

  it('default to 4 GiB and 200k inodes', () => {
    expect(disk()).toBe(4 * 1024 ** 3);
    expect(loadEnv({ GROVE_HOME: '/tmp/grove-env-test' }).GROVE_INODE_QUOTA).toBe(200_000);
  });

  it('read binary sizes, and 0/off as no quota', () => {
    expect(disk('512M')).toBe(512 * 1024 ** 2);
    expect(disk('2GiB')).toBe(2 * 1024 ** 3);
    expect(disk('1t')).toBe(1024 ** 4);
    expect(disk(String(64 * 1024 ** 2))).toBe(64 * 1024 ** 2);
    expect(disk('off')).toBe(0);
    expect(disk('0')).toBe(0);
    expect(loadEnv({ GROVE_HOME: '/tmp/grove-env-test', GROVE_INODE_QUOTA: '5000' }).GROVE_INODE_QUOTA).toBe(5000);
  });

  it('refuse what no filesystem image can be', () => {
    expect(() => disk('1M')).toThrow(/GROVE_DISK_QUOTA: a disk quota must be at least 16M/);
    expect(() => disk('lots')).toThrow(/GROVE_DISK_QUOTA: expected a size/);
    expect(() => disk('-4G')).toThrow(/GROVE_DISK_QUOTA/);
    expect(() => loadEnv({ GROVE_HOME: '/tmp/grove-env-test', GROVE_INODE_QUOTA: '10' })).toThrow(/GROVE_INODE_QUOTA/);
  });
});

describe('GROVE_WARM_POOL', () => {
  const warm = (v?: string) => loadEnv({ GROVE_HOME: '/tmp/grove-env-test', ...(v === undefined ? {} : { GROVE_WARM_POOL: v }) }).GROVE_WARM_POOL;

  it('defaults to one warm sandbox; 0 turns the pool off', () => {
    expect(warm()).toBe(1);
    expect(warm('0')).toBe(0);
    expect(warm('3')).toBe(3);
  });

  it('refuses what is not a small count', () => {
    expect(() => warm('-1')).toThrow(/GROVE_WARM_POOL/);
    expect(() => warm('many')).toThrow(/GROVE_WARM_POOL/);
    expect(() => warm('1.5')).toThrow(/GROVE_WARM_POOL/);
    expect(() => warm('9')).toThrow(/GROVE_WARM_POOL/);
  });
});

describe('GROVE_RUNTIME', () => {
  const runtime = (v?: string) => loadEnv({ GROVE_HOME: '/tmp/grove-env-test', ...(v === undefined ? {} : { GROVE_RUNTIME: v }) }).GROVE_RUNTIME;

  it('defaults to runc and takes runsc (gVisor)', () => {
    expect(runtime()).toBe('runc');
    expect(runtime('runc')).toBe('runc');
    expect(runtime('runsc')).toBe('runsc');
  });

  it('refuses any other runtime, naming the variable', () => {
    expect(() => runtime('kata')).toThrow(/GROVE_RUNTIME/);
    expect(() => runtime('')).toThrow(/GROVE_RUNTIME/);
  });
});

describe('the default cap (GROVE_MAX_RUNNING unset)', () => {
  const GiB = 1024 ** 3;
  it('is the smaller of half the memory at 256 MiB a workspace and 4 per core', () => {
    expect(defaultMaxRunning(24 * GiB, 2)).toBe(8); // this project's machine: CPU-bound
    expect(defaultMaxRunning(4 * GiB, 8)).toBe(8); // memory-bound: 2 GiB / 256 MiB
    expect(defaultMaxRunning(64 * GiB, 16)).toBe(64);
  });
  it('is at least 1 and at most the largest cap the setting accepts', () => {
    expect(defaultMaxRunning(256 * 1024 ** 2, 1)).toBe(1);
    expect(defaultMaxRunning(4096 * GiB, 256)).toBe(256);
  });
});
