// Limits on what one connection may hold: requests in flight at once (HTTP/1.1 pipelining lets a client send
// any number before reading an answer; node parses and dispatches them all), and the time a response may take
// to be written (a client that stops reading keeps its response, and everything the response holds, in memory
// until then). Past either the connection is closed.
import type { Socket } from 'node:net';
import type { NextFunction, Request, Response } from 'express';
import { RfdetrError } from '../errors.ts';

export interface ConnectionGuardOptions {
  /** Requests in flight on one connection; the next is answered 503 and the connection closes. */
  maxInFlight: number;
  /** A response must be written completely within this many ms of its first byte, else the connection is destroyed. */
  sendTimeoutMs: number;
  send: (res: Response, err: RfdetrError) => void;
}

export function connectionGuard(o: ConnectionGuardOptions) {
  const inFlight = new WeakMap<Socket, number>();
  return (req: Request, res: Response, next: NextFunction) => {
    const sock = req.socket;
    const n = (inFlight.get(sock) ?? 0) + 1;
    inFlight.set(sock, n);
    let done = false;
    let timer: NodeJS.Timeout | undefined;
    const end = () => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      inFlight.set(sock, (inFlight.get(sock) ?? 1) - 1);
    };
    res.once('finish', end);
    res.once('close', end);
    const writeHead = res.writeHead;
    res.writeHead = function (this: Response, ...args: Parameters<Response['writeHead']>) {
      if (!done && timer === undefined) {
        timer = setTimeout(() => {
          if (!res.writableFinished) res.destroy(new Error(`the response was not read within ${o.sendTimeoutMs} ms`));
        }, o.sendTimeoutMs);
        timer.unref();
      }
      return writeHead.apply(this, args);
    } as Response['writeHead'];
    if (n > o.maxInFlight) {
      res.setHeader('Connection', 'close');
      return o.send(res, new RfdetrError('E_QUEUE_FULL', `more than ${o.maxInFlight} requests in flight on one connection: wait for each answer before sending the next (no pipelining), or open another connection`, { max_in_flight_per_connection: o.maxInFlight }));
    }
    next();
  };
}
