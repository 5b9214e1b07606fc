import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { parsePreviewListenerPath, previewCap, previewCapMatches, previewRest, scrubPreviewResponse } from './preview.ts';

const TOKEN = 'test-token-0123456789abcdef';

describe('previewCap', () => {
  it('is a stable 43-character base64url HMAC of the slug under the token', () => {
    const cap = previewCap(TOKEN, 'demo~a');
    expect(cap).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(previewCap(TOKEN, 'demo~a')).toBe(cap);
    expect(previewCap(TOKEN, 'demo~b')).not.toBe(cap);
    expect(previewCap(`${TOKEN}x`, 'demo~a')).not.toBe(cap);
    expect(previewCapMatches(TOKEN, 'demo~a', cap)).toBe(true);
  });

  it('matches only its own slug under its own token, whatever is presented', () => {
    fc.assert(
      fc.property(fc.string(), fc.stringMatching(/^[a-z0-9][a-z0-9-]{0,10}$/), (presented, slug) => {
        fc.pre(presented !== previewCap(TOKEN, slug));
        expect(previewCapMatches(TOKEN, slug, presented)).toBe(false);
      }),
    );
    expect(previewCapMatches(TOKEN, 'demo~b', previewCap(TOKEN, 'demo~a'))).toBe(false);
    expect(previewCapMatches('another-token-0123456789', 'demo~a', previewCap(TOKEN, 'demo~a'))).toBe(false);
  });
});

describe('parsePreviewListenerPath', () => {
  const cap = previewCap(TOKEN, 'demo~a');
  it('maps /pv/<cap>/<slug>/<port>/rest?q to the backend preview path, mounted at /pv/<cap>/<slug>', () => {
    expect(parsePreviewListenerPath(`/pv/${cap}/demo~a/5173/src/main.js?v=1`, TOKEN)).toEqual({ slug: 'demo~a', path: '/preview/5173/src/main.js?v=1', prefix: `/pv/${cap}/demo~a` });
    expect(parsePreviewListenerPath(`/pv/${cap}/demo~a/5173`, TOKEN).path).toBe('/preview/5173');
    expect(parsePreviewListenerPath(`/pv/${cap}/demo%7Ea/5173/`, TOKEN).slug).toBe('demo~a');
  });

  it.each([
    ['a wrong cap', `/pv/${'A'.repeat(43)}/demo~a/5173/`],
    ["another slug's cap", `/pv/${previewCap(TOKEN, 'demo~b')}/demo~a/5173/`],
    ['no cap', '/pv/demo~a/5173/'],
    ['a bad slug', `/pv/${cap}/..%2Fx/5173/`],
    ['a bad port', `/pv/${cap}/demo~a/99999/`],
    ['a port with a sign', `/pv/${cap}/demo~a/+80/`],
    ['/api', '/api/workspaces'],
    ['/w', '/w/demo~a/thread'],
    ['the root', '/'],
  ])('answers not_found for %s', (_what, url) => {
    expect(() => parsePreviewListenerPath(url, TOKEN)).toThrow(expect.objectContaining({ code: 'not_found' }));
  });
});

describe('previewRest and scrubPreviewResponse', () => {
  it('reads /preview/<port>[/rest][?q] and nothing else', () => {
    expect(previewRest('/preview/3000/a/b?x=1')).toEqual({ port: 3000, rest: '/a/b', query: '?x=1' });
    expect(previewRest('/preview/3000')).toEqual({ port: 3000, rest: '', query: '' });
    expect(previewRest('/previews/3000/')).toBeNull();
    expect(previewRest('/thread')).toBeNull();
    expect(() => previewRest('/preview/0/')).toThrow(expect.objectContaining({ code: 'invalid_input' }));
    expect(() => previewRest('/preview/')).toThrow(expect.objectContaining({ code: 'invalid_input' }));
  });

  it('drops Grove cookies and Service-Worker-Allowed, and sets no-referrer', () => {
    const h = { 'set-cookie': ['grove_token=x; Path=/api', 'app=1'], 'service-worker-allowed': '/', 'referrer-policy': 'unsafe-url' };
    scrubPreviewResponse(h);
    expect(h).toEqual({ 'set-cookie': ['app=1'], 'referrer-policy': 'no-referrer' });
  });
});
