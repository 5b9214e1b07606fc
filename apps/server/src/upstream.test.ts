import { describe, expect, it } from 'vitest';
import { ChunkedDecoder, UpstreamProtocolError, framingOf, parseResponseHead, requestHead } from './upstream.ts';

const head = (text: string) => parseResponseHead(text);

describe('parseResponseHead', () => {
  it('reads the status, its text and the headers as sent', () => {
    expect(head('HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2')).toEqual({
      http10: false,
      status: 200,
      statusText: 'OK',
      raw: ['Content-Type', 'text/plain', 'Set-Cookie', 'a=1', 'Set-Cookie', 'b=2'],
    });
    expect(head('HTTP/1.0 404 Not Found').http10).toBe(true);
    expect(head('HTTP/1.1 204').statusText).toBe('');
  });

  it('refuses what could be read two ways: folded lines, names that are not tokens, bare CR, other protocols', () => {
    for (const bad of [
      'HTTP/1.1 200 OK\r\nX-A: 1\r\n folded',
      'HTTP/1.1 200 OK\r\nBad Name: 1',
      'HTTP/1.1 200 OK\r\n: no name',
      'HTTP/1.1 200 OK\r\nX-A: 1\rSet-Cookie: x=1',
      'HTTP/2 200 OK',
      'HTTP/1.1 20 OK',
      'SSH-2.0-OpenSSH',
    ]) {
      expect(() => head(bad), JSON.stringify(bad)).toThrow(UpstreamProtocolError);
    }
  });
});

describe('framingOf', () => {
  const of = (text: string, method = 'GET') => framingOf(head(text), method);

  it('frames by length, by chunks, by the close, or not at all', () => {
    expect(of('HTTP/1.1 200 OK\r\nContent-Length: 12')).toEqual({ kind: 'length', length: 12 });
    expect(of('HTTP/1.1 200 OK\r\nContent-Length: 5\r\ncontent-length: 5')).toEqual({ kind: 'length', length: 5 });
    expect(of('HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked')).toEqual({ kind: 'chunked' });
    expect(of('HTTP/1.1 200 OK')).toEqual({ kind: 'close' });
    expect(of('HTTP/1.1 200 OK\r\nContent-Length: 9', 'HEAD')).toEqual({ kind: 'none' });
    expect(of('HTTP/1.1 204 No Content')).toEqual({ kind: 'none' });
    expect(of('HTTP/1.1 304 Not Modified\r\nContent-Length: 40')).toEqual({ kind: 'none' });
  });

  it('refuses framings a smuggler would use', () => {
    for (const bad of [
      'HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6',
      'HTTP/1.1 200 OK\r\nContent-Length: 5, 6',
      'HTTP/1.1 200 OK\r\nContent-Length: -1',
      'HTTP/1.1 200 OK\r\nContent-Length: 0x10',
      'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5',
      'HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked',
      'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked',
    ]) {
      expect(() => of(bad), JSON.stringify(bad)).toThrow(UpstreamProtocolError);
    }
  });
});

describe('ChunkedDecoder', () => {
  const body = Buffer.from('5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nX-Trailer: t\r\n\r\n');

  it('decodes a body however it is split, and says how much was left past its end', () => {
    for (let cut = 1; cut < body.length; cut++) {
      const d = new ChunkedDecoder();
      const a = d.push(body.subarray(0, cut));
      const b = d.push(Buffer.concat([body.subarray(cut), Buffer.from('NEXT')]));
      expect(Buffer.concat([...a.payload, ...b.payload]).toString(), `cut at ${cut}`).toBe('hello, world');
      expect(d.done).toBe(true);
      expect(b.rest).toBe(4);
    }
  });

  it('refuses a bad size, a bare LF and data longer than its size', () => {
    for (const bad of ['zz\r\n', '5\nhello\r\n', '3\r\nhello\r\n', `${'f'.repeat(13)}\r\n`]) {
      expect(() => new ChunkedDecoder().push(Buffer.from(bad)), JSON.stringify(bad)).toThrow(UpstreamProtocolError);
    }
  });
});

describe('requestHead', () => {
  it('writes the request line and each header, lists as repeated lines', () => {
    expect(requestHead('GET', '/status?x=1', { host: 'h', 'x-a': ['1', '2'], 'content-length': 0 })).toBe(
      'GET /status?x=1 HTTP/1.1\r\nhost: h\r\nx-a: 1\r\nx-a: 2\r\ncontent-length: 0\r\n\r\n',
    );
  });
});
