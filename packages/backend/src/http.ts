import type { IncomingMessage, ServerResponse } from 'node:http';
import { GroveError, isGroveError } from '@grove/contracts';
import type { ErrorBody } from '@grove/contracts';
import type { Logger } from './logger.ts';

export const DEFAULT_MAX_BODY_BYTES = 1024 * 1024;

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(text),
    'cache-control': 'no-store',
  });
  res.end(text);
}

/** The one error handler: GroveError becomes its own status and body; anything else is a logged 500. */
export function sendError(args: { req: IncomingMessage; res: ServerResponse; err: unknown; logger: Logger }): void {
  const { req, res, err, logger } = args;
  const route = `${req.method ?? '?'} ${req.url ?? '?'}`;
  if (res.headersSent) {
    // Too late for a status code; cutting the connection is the only honest signal left.
    logger.error({ err, route }, 'request failed after the response started');
    res.destroy();
    return;
  }
  if (isGroveError(err)) {
    if (err.status >= 500) logger.error({ err, route }, 'request failed');
    sendJson(res, err.status, err.toBody());
    return;
  }
  logger.error({ err, route }, 'request failed with an unexpected error');
  sendJson(res, 500, { code: 'internal', message: 'internal error; see the backend log' } satisfies ErrorBody);
}

/** Reads and parses a JSON body of at most maxBytes; GroveError(invalid_input) when it is too big, empty or not JSON. */
export function readJsonBody(req: IncomingMessage, maxBytes: number): Promise<unknown> {
  const tooLarge = () => new GroveError('invalid_input', `request body is larger than ${maxBytes} bytes`);
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > maxBytes) {
    // Drain what the client sends anyway so the connection stays usable for the 422.
    req.resume();
    return Promise.reject(tooLarge());
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let total = 0;
    const onData = (chunk: Buffer) => {
      total += chunk.length;
      if (total <= maxBytes) {
        chunks.push(chunk);
        return;
      }
      req.off('data', onData);
      req.off('end', onEnd);
      req.resume();
      reject(tooLarge());
    };
    const onEnd = () => {
      const text = Buffer.concat(chunks).toString('utf8');
      if (text.trim() === '') {
        reject(new GroveError('invalid_input', 'request body is empty; expected a JSON object'));
        return;
      }
      try {
        resolve(JSON.parse(text));
      } catch (err) {
        reject(new GroveError('invalid_input', `request body is not valid JSON: ${err instanceof Error ? err.message : String(err)}`));
      }
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', reject);
  });
}
