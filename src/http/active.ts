// The requests in progress, for the drain: each one is aborted when its client goes away (or the drain's
// deadline passes), and close() waits for every one of them to end; abortedBy() is the race arm that ends a
// request's wait (its body, its upload) when it is aborted.
import type { Response } from 'express';
import { abortedError } from './engine-queue.ts';

/** One request in progress. */
export interface ActivePredict {
  done: Promise<void>;
  /** Aborted when the client goes away or the drain deadline passes. */
  abort: AbortController;
}

/** Registers a request in `active`, aborted when `res` closes before it was written; `end()` deregisters it. */
export function beginActive(active: Set<ActivePredict>, res: Response): { abort: AbortController; end: () => void } {
  const abort = new AbortController();
  let finish!: () => void;
  const entry: ActivePredict = { abort, done: new Promise((r) => (finish = r)) };
  active.add(entry);
  const onClose = () => {
    if (!res.writableFinished) abort.abort(abortedError('in progress'));
  };
  res.on('close', onClose);
  return {
    abort,
    end: () => {
      res.off('close', onClose);
      active.delete(entry);
      finish();
    },
  };
}

/** Rejects with the signal's reason when it aborts; never resolves. */
export function abortedBy(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    if (signal.aborted) reject(signal.reason);
    else signal.addEventListener('abort', () => reject(signal.reason), { once: true });
  });
}
