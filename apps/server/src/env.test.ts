import { describe, expect, it } from 'vitest';
import { loadEnv } from './env.ts';

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
