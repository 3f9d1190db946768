// Every request gets an id (a well-formed X-Request-Id is kept, else a UUID), one JSON log line when it ends,
// and its count and duration in the metrics; /predict errors are also counted by code. Probes and scrapes
// arrive every few seconds and are logged at debug level only, so they do not drown the log.
import { randomUUID } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import type { Logger } from './log.ts';
import type { ServerMetrics } from './metrics.ts';

const REQUEST_ID = /^[A-Za-z0-9._:@/+=-]{1,128}$/;
const QUIET_ROUTES = new Set(['/metrics', '/tt-liveness', '/health', '/ready', '/v1/health']);

function round3(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}

export function requestLog(logger: Logger, metrics: ServerMetrics) {
  function logRequest(req: Request, res: Response, t0: number, finished: boolean) {
    const route: string = res.locals.route ?? 'unmatched';
    const ms = performance.now() - t0;
    const status = finished ? res.statusCode : 499;
    metrics.requests.inc({ route, method: req.method, status: String(status) });
    metrics.requestDuration.observe({ route }, ms / 1000);
    if (route === '/predict' && (res.locals.errorCode || !finished)) metrics.rejected.inc({ code: res.locals.errorCode ?? 'E_ABORTED' });
    if (QUIET_ROUTES.has(route) && logger.level !== 'debug') return;
    const fields: Record<string, unknown> = {
      event: 'request',
      request_id: res.locals.requestId,
      method: req.method,
      path: req.path,
      route,
      status,
      duration_ms: round3(ms),
    };
    if (res.locals.errorCode) fields.error = res.locals.errorCode;
    if (res.locals.timing) fields.timing_ms = res.locals.timing;
    if (res.locals.numDetections !== undefined) fields.num_detections = res.locals.numDetections;
    if (!finished) fields.client_closed = true;
    logger.log(status >= 500 && status !== 503 ? 'error' : status >= 400 ? 'warn' : route === '/predict' ? 'info' : 'debug', `${req.method} ${req.path} ${status}`, fields);
  }

  return (req: Request, res: Response, next: NextFunction) => {
    const t0 = performance.now();
    const given = req.headers['x-request-id'];
    const id = typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
    res.locals.requestId = id;
    res.locals.t0 = t0;
    res.setHeader('X-Request-Id', id);
    res.on('finish', () => logRequest(req, res, t0, true));
    res.on('close', () => {
      if (!res.writableFinished) logRequest(req, res, t0, false);
    });
    next();
  };
}

/** Tags a route so the log and metrics name its template. */
export const route = (path: string) => (_req: Request, res: Response, next: NextFunction) => {
  res.locals.route = path;
  next();
};
