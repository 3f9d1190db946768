// Who a request comes from, for the fair share (admission, decode, engine queue): its API key when keys are
// on, else its remote address. X-Forwarded-For is believed only when the operator says a proxy sets it
// (--trust-proxy), and then only its last entry: the address the proxy itself saw (the entries before it are
// whatever the client wrote).
import type { Request, Response } from 'express';

export function clientIdOf(req: Request, res: Response, trustProxy: boolean): string {
  const key = res.locals.apiKeyId as string | undefined;
  if (key) return key;
  if (trustProxy) {
    const xff = req.headers['x-forwarded-for'];
    const last = (Array.isArray(xff) ? xff.join(',') : xff ?? '').split(',').map((s) => s.trim()).filter((s) => s !== '').pop();
    if (last) return `addr:${last.slice(0, 64)}`;
  }
  return `addr:${req.socket.remoteAddress ?? 'unknown'}`;
}
