// The one place that turns any thrown value into an HTTP error response; unknown errors are logged with their cause.
import type { ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { GroveError, isGroveError, type ErrorBody } from '@grove/contracts';

export function toGroveError(err: unknown, logger: Logger): GroveError {
  if (isGroveError(err)) {
    if (err.status >= 500) logger.error({ err, code: err.code, cause: err.cause }, err.message);
    return err;
  }
  logger.error({ err }, 'unexpected error');
  return new GroveError('internal', 'internal error; see the server log', { cause: err });
}

export function errorPayload(err: unknown, logger: Logger): { status: number; body: ErrorBody } {
  const g = toGroveError(err, logger);
  return { status: g.status, body: g.toBody() };
}

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text), 'cache-control': 'no-store' });
  res.end(text);
}

export function sendError(res: ServerResponse, err: unknown, logger: Logger): void {
  const { status, body } = errorPayload(err, logger);
  sendJson(res, status, body);
}
