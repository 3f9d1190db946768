// Errors as HTTP responses: the status and Retry-After come from the one error table (src/errors.ts), the body
// is `{detail, code, …details, request_id}`, and an error from the engine is worded as the contract's
// `inference failed: <Type>: <text>`. No status or code is decided from message text; the one use of it is
// cutting the sidecar client's own prefix off an engine's message so it is not said twice (inferenceError).
import type { Response } from 'express';
import { ERRORS, RfdetrError, isRfdetrError, retryable, type ErrorCode } from '../errors.ts';

export interface ErrorResponder {
  /** Answers `err` on `res` (or destroys the connection when the headers are already out). */
  send(res: Response, err: unknown): void;
}

/** An error as the response body says it; the status and headers are the table's whatever the shape. */
export interface ErrorFacts {
  code: ErrorCode;
  status: number;
  message: string;
  details: Record<string, unknown> | undefined;
  requestId: unknown;
}

/** This API's error body: `{detail, code, …details, request_id}`. */
export function rfdetrErrorBody(e: ErrorFacts): object {
  const body: Record<string, unknown> = { detail: e.message, code: e.code };
  if (e.details) for (const [k, v] of Object.entries(e.details)) if (!(k in body)) body[k] = v;
  body.request_id = e.requestId;
  return body;
}

/**
 * `retryAfterS(code)` gives the Retry-After seconds for a retryable code; `closeAfter()` says whether the
 * connection should close after any error (while draining); `shape` words the body (another server's API has
 * its own error shape, src/http/compat-*.ts).
 */
export function createErrorResponder(retryAfterS: (code: ErrorCode) => number, closeAfter: () => boolean, shape: (e: ErrorFacts) => object = rfdetrErrorBody): ErrorResponder {
  return {
    send(res, err) {
      if (res.headersSent) {
        res.destroy();
        return;
      }
      let code: ErrorCode;
      let message: string;
      let details: Record<string, unknown> | undefined;
      if (isRfdetrError(err)) {
        code = err.code;
        message = err.message;
        details = err.details;
      } else {
        code = 'E_INTERNAL';
        message = `internal error: ${(err as Error)?.name ?? 'Error'}: ${(err as Error)?.message ?? String(err)}`;
      }
      if (retryable(code)) res.setHeader('Retry-After', String(retryAfterS(code)));
      // A body we did not read to the end (too large, refused early, timed out) is not drained on a kept-alive
      // connection: the next request on it would start in the middle of this one's body.
      if (closeAfter() || !res.req.complete) res.setHeader('Connection', 'close');
      res.locals.errorCode = code;
      res.status(ERRORS[code].status).json(shape({ code, status: ERRORS[code].status, message, details, requestId: res.locals.requestId }));
    },
  };
}

/**
 * An error from the backend or the stages after it: its own status when that is not 500, else the contract's
 * `inference failed: <Type>: <text>`. Type is the sidecar's wire code (e.g. E_FORWARD) when there is one,
 * else the error code or the JS error name.
 */
export function inferenceError(e: unknown): RfdetrError {
  if (isRfdetrError(e) && ERRORS[e.code].status !== 500) return e;
  const wire = isRfdetrError(e) ? (e.details?.wireCode ?? e.details?.type) : undefined;
  const type = typeof wire === 'string' ? wire : isRfdetrError(e) ? e.code : e instanceof Error ? e.name : 'Error';
  let text = e instanceof Error ? e.message : String(e);
  // The sidecar client words it "sidecar infer failed: <wire code>: <message>"; keep the engine's message.
  const prefix = `sidecar infer failed: ${type}: `;
  if (text.startsWith(prefix)) text = text.slice(prefix.length);
  const code: ErrorCode = isRfdetrError(e) ? e.code : 'E_INFERENCE';
  return new RfdetrError(code, `inference failed: ${type}: ${text}`, isRfdetrError(e) ? e.details : undefined, { cause: e });
}
