// POST /predict ahead of express's router: the node:http listener hands a /predict request straight to the
// same middlewares the app runs for it (request log, connection guard, API key, route tag, handler), in the
// same order, and everything else to the express app. The request and response get what express's own
// app.handle gives them first (the prototypes with req.is/res.json, the two back references, res.locals), so
// the middlewares and the error responder see the objects they see under express. What it saves: the router's
// walk past the probe and docs routes and its per-request set-up, ~0.05–0.1 ms of the ~0.5 ms a 640×480
// request spent between arrival and its first body byte on this 2-core host (bench/server/RESULTS.md §9).
// The app keeps its own POST /predict route, so a listener built on `app` alone answers the same.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Express, NextFunction, Request, RequestHandler, Response } from 'express';

/** True for what express routes to `app.post('/predict')` (strict, case-sensitive): the path exactly, any query. */
export function isPredictRequest(method: string | undefined, url: string | undefined): boolean {
  return method === 'POST' && url !== undefined && (url === '/predict' || url.startsWith('/predict?'));
}

/**
 * The listener: /predict through `chain` (each middleware's next() runs the following one; next(err) or a throw
 * goes to `onError`, as express's error handler would), the rest through `app`.
 */
export function createRequestListener(app: Express, chain: readonly RequestHandler[], onError: (res: Response, err: unknown) => void) {
  return (req: IncomingMessage, res: ServerResponse): void => {
    if (!isPredictRequest(req.method, req.url)) {
      app(req, res);
      return;
    }
    const r = req as Request;
    const s = res as Response;
    r.res = s;
    s.req = r;
    Object.setPrototypeOf(req, app.request);
    Object.setPrototypeOf(res, app.response);
    s.locals = Object.create(null);
    let i = 0;
    const next: NextFunction = (err?: unknown) => {
      if (err) return onError(s, err);
      const mw = chain[i++];
      if (!mw) return;
      try {
        void mw(r, s, next);
      } catch (e) {
        onError(s, e);
      }
    };
    next();
  };
}
