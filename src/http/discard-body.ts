// An answer decided before a request's body is read (DeepStack's custom/{model} naming a model not served): the
// body is read and thrown away first, then the answer goes. Answering at once and closing while the client is
// still uploading makes the kernel reset the connection on the bytes that keep arriving, and the client's
// stack may drop the answer with it (the client sees ECONNRESET / "connection reset" instead of the 404).
// Bounded like a body we keep: past `maxBytes` (or a Content-Length saying so) or after `timeoutMs` the answer
// goes at once and the connection closes (respond.ts closes after a body not read to its end).
import type { Request } from 'express';

export interface DiscardLimits {
  /** Bytes read and dropped at most (the route's body limit). */
  maxBytes: number;
  /** Time the body may take to arrive, ms (--body-timeout). */
  timeoutMs: number;
}

/** Calls `answer` once `req`'s body has been read and dropped, or at once when it is past the limits. */
export function answerAfterBody(req: Request, limits: DiscardLimits, answer: () => void): void {
  const declared = Number(req.headers['content-length']);
  if (req.complete || (Number.isFinite(declared) && declared > limits.maxBytes)) return answer();
  let bytes = 0;
  let done = false;
  const finish = () => {
    if (done) return;
    done = true;
    clearTimeout(timer);
    req.off('data', onData);
    req.off('end', finish);
    req.off('close', finish);
    if (!req.complete) req.pause();
    answer();
  };
  const onData = (chunk: Buffer) => {
    bytes += chunk.length;
    if (bytes > limits.maxBytes) finish();
  };
  const timer = setTimeout(finish, limits.timeoutMs);
  req.on('data', onData);
  req.once('end', finish);
  req.once('close', finish);
}
