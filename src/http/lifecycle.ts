// The server's two lifecycle steps. listen(): open the port and log the ready line once the engine is ready
// too. drain(): readiness turns 503 at once and new requests are answered 503 E_DRAINING, but the listener
// stays open (probes and clients get an answer, not "connection refused") until the requests in flight have
// finished or the drain deadline passed; then the backend is closed (destroyed past the deadline) and the
// listener closes.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Express } from 'express';
import { drainingError } from '../errors.ts';
import type { ModelLanes } from './model-lanes.ts';
import { READY_MESSAGE, type Logger } from './log.ts';
import type { ActivePredict } from './active.ts';

export interface ListenResult {
  host: string;
  port: number;
  url: string;
}

export interface LifecycleDeps {
  app: Express;
  /** The listener the HTTP server runs (default `app`): the app, or a route ahead of it (predict-route.ts). */
  listener?: http.RequestListener;
  /** The models served (each lane's backend is closed by the drain, a swap's retiring ones too). */
  lanes: ModelLanes;
  /** True once --min-ready models are ready (and the server is not draining). */
  serving: () => boolean;
  logger: Logger;
  active: Set<ActivePredict>;
  /** Fields of the ready line besides url/engine/device. */
  readyFields: Record<string, unknown>;
}

export function createLifecycle(d: LifecycleDeps) {
  let httpServer: http.Server | undefined;
  let listening: ListenResult | undefined;
  let readyLogged = false;
  let drainPromise: Promise<void> | undefined;
  let draining = false;

  function maybeLogReady() {
    if (readyLogged || !listening || !d.serving()) return;
    readyLogged = true;
    const { backend } = d.lanes.default;
    d.logger.log('info', READY_MESSAGE, {
      event: 'ready', url: listening.url, engine: backend.info?.engine ?? null, device: backend.info?.device ?? null, ...d.readyFields,
      models: d.lanes.list().map((l) => ({ id: l.id, state: l.engineState.state })),
    });
  }
  d.lanes.onChange(maybeLogReady);

  function listen(host: string, port: number): Promise<ListenResult> {
    if (httpServer) return Promise.reject(new Error('listen() was already called on this server'));
    if (draining) return Promise.reject(new Error('the server is draining; create a new one'));
    const server = http.createServer(d.listener ?? d.app);
    httpServer = server;
    // Header and whole-request limits for clients that never finish; the /predict body has its own, shorter
    // timeout (admission.ts).
    server.requestTimeout = 300_000;
    server.headersTimeout = 20_000;
    server.keepAliveTimeout = 5_000;
    return new Promise<ListenResult>((resolve, reject) => {
      const onError = (e: NodeJS.ErrnoException) => {
        httpServer = undefined;
        reject(new Error(`cannot listen on ${host}:${port}: ${e.code ?? e.message}${e.code === 'EADDRINUSE' ? ' (the port is in use: pick another with --port)' : ''}`, { cause: e }));
      };
      server.once('error', onError);
      server.listen(port, host, () => {
        server.off('error', onError);
        const addr = server.address() as AddressInfo;
        const shownHost = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
        listening = { host: addr.address, port: addr.port, url: `http://${shownHost}:${addr.port}` };
        d.logger.log('info', `listening on ${listening.url}`, { event: 'listening', url: listening.url, engine_state: d.lanes.default.engineState.state });
        maybeLogReady();
        resolve(listening);
      });
    });
  }

  function drain(drainDeadlineMs: number): Promise<void> {
    drainPromise ??= (async () => {
      draining = true;
      for (const l of d.lanes.all()) l.engineState.startDraining();
      d.logger.log('info', 'draining: readiness is 503, new requests are answered 503, in-flight requests finish', { event: 'draining', in_flight: d.active.size, deadline_ms: drainDeadlineMs });
      let timer: NodeJS.Timeout | undefined;
      const timedOut = await Promise.race([
        Promise.all([...d.active].map((c) => c.done)).then(() => false),
        new Promise<boolean>((r) => (timer = setTimeout(() => r(true), Math.max(0, drainDeadlineMs)))),
      ]);
      clearTimeout(timer);
      if (timedOut) {
        const err = drainingError(`and the ${drainDeadlineMs} ms drain deadline passed before this request finished`);
        d.logger.log('warn', 'drain deadline passed; answering the remaining requests with 503', { event: 'drain_timeout', remaining: d.active.size });
        for (const l of d.lanes.all()) l.engine.rejectWaiting(err);
        for (const c of d.active) c.abort.abort(err);
        await Promise.all([...d.active].map((c) => c.done));
        for (const l of d.lanes.all()) l.backend.destroy(err);
      } else {
        await Promise.all(d.lanes.all().map(async (l) => {
          try {
            await l.backend.close();
          } catch (e) {
            d.logger.log('error', `closing the backend of model ${l.id} failed: ${(e as Error).message}`, { event: 'backend_close_failed', model: l.id });
          }
        }));
      }
      for (const l of d.lanes.all()) l.engineState.stop();
      if (httpServer) {
        const closed = new Promise<void>((r) => httpServer!.close(() => r()));
        httpServer.closeIdleConnections();
        httpServer.closeAllConnections();
        await closed;
      }
      d.logger.log('info', 'drained', { event: 'drained', timed_out: timedOut });
    })();
    return drainPromise;
  }

  return { listen, drain };
}
