// Test helper: one HTTP request over a Unix socket (JSON body, POST by default), answering status and raw text.
import { request } from 'node:http';

export function call(socketPath: string, o: { method?: string; path: string; headers?: Record<string, string>; body?: unknown }): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const body = o.body === undefined ? undefined : JSON.stringify(o.body);
    const req = request({ socketPath, path: o.path, method: o.method ?? 'POST', headers: { 'content-type': 'application/json', ...o.headers } }, (res) => {
      let text = '';
      res.on('data', (d: Buffer) => (text += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}
