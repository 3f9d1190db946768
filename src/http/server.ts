// The HTTP server: seed 000 §3's contract (/health, /info, /v1/models, /predict) plus the probes, metrics and
// limits serving users expect (/tt-liveness, /ready, /v1/health, /metrics, /openapi.json). Library code: the
// CLI owns signals and exit codes and calls drain() on SIGTERM.
//
// One /predict request: admission (ready? draining? queue full?) → body (JSON | multipart | raw) → decode +
// preprocess (bounded concurrency, overlapping the forward in progress) → the engine queue (one forward at a
// time) → postprocess → JSON. A per-request deadline covers all of it; a client that leaves before its
// forward starts costs no forward.
import http from 'node:http';
import os from 'node:os';
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import express, { type NextFunction, type Request, type Response } from 'express';
import { ERRORS, RfdetrError, isRfdetrError, type ErrorCode } from '../errors.ts';
import type { BackendState, InferenceBackend } from '../sidecar/backend.ts';
import { bodyFormOf, bodyLimitFor, createBodyReader, type PredictInput } from './body.ts';
import { EngineQueue, abortedError, deadlineError, type EngineRun } from './engine-queue.ts';
import { Limiter } from './limiter.ts';
import { PrepPool } from './prep-pool.ts';
import { createJsonLogger, READY_MESSAGE, type Logger, type LogLevel } from './log.ts';
import { STAGES, ServerMetrics, type Stage } from './metrics.ts';
import { buildOpenApi } from './openapi.ts';
import { buildPredictResponse } from '../detect/pipeline.ts';
import { defaultPipeline, type Detection, type Pipeline, type RawOutputs } from './pipeline.ts';

export const MODEL_NAME = 'RF-DETR-base';
export const MODEL_ID = 'Roboflow/rf-detr-base';
export const INPUT_SIZE: [number, number] = [560, 560];

/** What /info reports about the weights; the CLI fills it from the resolved snapshot. */
export interface WeightsInfo {
  repo: string;
  revision: string | null;
  /** Where the files came from, e.g. "hub", "local", "synth". */
  source?: string;
  dir?: string;
  files?: Record<string, unknown> | string[];
  [key: string]: unknown;
}

export interface CreateServerOptions {
  backend: InferenceBackend;
  /** The image/detect stages. Default `defaultPipeline()` (src/image + src/detect). */
  pipeline?: Pipeline;
  weights?: WeightsInfo;
  /** COCO-91 labels by class index, used when the backend's hello carries none. */
  labels?: readonly string[];
  /** Requests admitted but not yet handed to the engine (decoding, preprocessing or waiting); more → 503. Default 16. */
  queueSize?: number;
  /** Per-request deadline from arrival to response, ms; → 504. Default 60000. */
  deadlineMs?: number;
  /** Images decoded + preprocessed at once. Default min(4, available cores). */
  prepConcurrency?: number;
  /**
   * Decode + preprocess in `prepConcurrency` worker threads (the default pipeline's stages), keeping the event
   * loop free. Default true unless a custom `pipeline` is given; false runs `pipeline` on the main thread.
   */
  prepInWorkers?: boolean;
  /** Forwards handed to the backend at once. Default 1 (the engine runs one forward at a time). */
  engineConcurrency?: number;
  logger?: Logger;
  /** Used only when `logger` is not given. Default "info". */
  logLevel?: LogLevel;
  /** Extra fields for /info's "device_params" (thread count, device id, …). */
  deviceParams?: Record<string, unknown>;
  /** Model id for /v1/models. Default "Roboflow/rf-detr-base". */
  modelId?: string;
  /** Interval at which the backend state is sampled for probes, metrics and the ready line. Default 100 ms. */
  statePollMs?: number;
  /** Register prom-client's process metrics (CPU, memory, event loop lag). Default true. */
  defaultMetrics?: boolean;
}

export interface ListenResult {
  host: string;
  port: number;
  url: string;
}

export interface RfdetrServer {
  app: express.Express;
  metrics: ServerMetrics;
  /** Starts the HTTP listener; logs READY_MESSAGE once the backend is ready too. */
  listen(host: string, port: number): Promise<ListenResult>;
  /**
   * Readiness 503, stop accepting, let in-flight requests finish for up to `deadlineMs`, then answer the
   * rest with 503, close the backend (destroy it if the deadline passed) and close the listener. Idempotent.
   */
  drain(deadlineMs: number): Promise<void>;
  readonly draining: boolean;
  /** The engine queue (for tests and the bench: depth, busy time, forward count). */
  readonly engine: EngineQueue;
}

const REQUEST_ID = /^[A-Za-z0-9._:@/+=-]{1,128}$/;
const STARTING_RETRY_AFTER_S = 5;

interface PredictContext {
  id: string;
  t0: number;
  done: Promise<void>;
  /** Aborted when the client goes away or the drain deadline passes. */
  abort: AbortController;
}

function round3(ms: number): number {
  // Retry-After and log durations only; response timings are never rounded.
  return Math.round(ms * 1000) / 1000;
}

export function createServer(opts: CreateServerOptions): RfdetrServer {
  const backend = opts.backend;
  const pipeline = opts.pipeline ?? defaultPipeline();
  const queueSize = opts.queueSize ?? 16;
  const deadlineMs = opts.deadlineMs ?? 60_000;
  const prepConcurrency = opts.prepConcurrency ?? Math.max(1, Math.min(4, os.availableParallelism()));
  const engineConcurrency = opts.engineConcurrency ?? 1;
  for (const [name, v, min] of [['queueSize', queueSize, 1], ['deadlineMs', deadlineMs, 1], ['prepConcurrency', prepConcurrency, 1], ['engineConcurrency', engineConcurrency, 1]] as const) {
    if (!Number.isInteger(v) || v < min) throw new RangeError(`Expected an integer >= ${min} for ${name} but received ${String(v)}`);
  }
  const logger = opts.logger ?? createJsonLogger(opts.logLevel ?? 'info');
  const metrics = new ServerMetrics({ defaultMetrics: opts.defaultMetrics });
  const limits = { maxImageBytes: pipeline.maxImageBytes, maxBodyBytes: bodyLimitFor(pipeline.maxImageBytes) };
  const readBody = createBodyReader(limits);
  const prep = new Limiter(prepConcurrency);
  const pool = (opts.prepInWorkers ?? opts.pipeline === undefined) ? new PrepPool(prepConcurrency) : undefined;
  const startedAt = Date.now();

  let admitted = 0; // accepted /predict requests not yet handed to the engine queue
  const active = new Set<PredictContext>();
  let draining = false;
  let drainPromise: Promise<void> | undefined;
  let httpServer: http.Server | undefined;
  let listening: ListenResult | undefined;
  let readyLogged = false;
  let forwardEwmaMs = 0;
  let lastBusyMs = 0;

  const updateDepth = () => {
    metrics.queueDepth.set({ stage: 'admitted' }, admitted + engine.depth);
    metrics.queueDepth.set({ stage: 'prep' }, prep.waiting);
    metrics.queueDepth.set({ stage: 'engine' }, engine.depth);
    metrics.inFlight.set(active.size);
  };
  const engine: EngineQueue = new EngineQueue(backend, engineConcurrency, {
    onChange: (_waiting, inFlight) => {
      metrics.engineForwardsInFlight.set(inFlight);
      const busy = engine.busyMs();
      metrics.engineBusySeconds.inc(Math.max(0, busy - lastBusyMs) / 1000);
      lastBusyMs = busy;
      updateDepth();
    },
  });

  // The backend's state, sampled: probes read this cached copy and never touch the backend. Optional extras
  // a backend may offer (the sidecar supervisor does): `restarts` (a count), `failure` (why it failed), and
  // `on('state', fn)` for immediate updates.
  const extras = backend as unknown as {
    restarts?: number;
    failure?: Error;
    on?: (ev: string, fn: (s: BackendState) => void) => unknown;
    off?: (ev: string, fn: (s: BackendState) => void) => unknown;
  };
  let state: BackendState = backend.state;
  let restartsSeen = typeof extras.restarts === 'number' ? extras.restarts : 0;
  metrics.setEngineState(state);
  const onState = (next: BackendState) => {
    if (typeof extras.restarts === 'number') {
      if (extras.restarts > restartsSeen) metrics.sidecarRestarts.inc(extras.restarts - restartsSeen);
      restartsSeen = extras.restarts;
    }
    if (next === state) return;
    if (typeof extras.restarts !== 'number' && state === 'ready' && next === 'restarting') metrics.sidecarRestarts.inc();
    logger.log(next === 'failed' ? 'error' : 'info', `engine state: ${state} -> ${next}`, { event: 'engine_state', from: state, to: next });
    state = next;
    metrics.setEngineState(state);
    maybeLogReady();
  };
  const poll = setInterval(() => onState(backend.state), opts.statePollMs ?? 100);
  poll.unref();
  const stateListener = (s: BackendState) => onState(s);
  if (typeof extras.on === 'function') extras.on('state', stateListener);

  function maybeLogReady() {
    if (readyLogged || !listening || state !== 'ready' || draining) return;
    readyLogged = true;
    logger.log('info', READY_MESSAGE, {
      event: 'ready',
      url: listening.url,
      model: MODEL_NAME,
      engine: backend.info?.engine ?? null,
      device: backend.info?.device ?? null,
      queue_size: queueSize,
      deadline_ms: deadlineMs,
    });
  }

  const labels = (): readonly string[] => backend.info?.labels?.length ? backend.info.labels : opts.labels ?? [];

  // ---- errors ------------------------------------------------------------------------------------------

  function errorBody(res: Response, code: ErrorCode, message: string, details?: Record<string, unknown>) {
    const body: Record<string, unknown> = { detail: message, code };
    if (details) for (const [k, v] of Object.entries(details)) if (!(k in body)) body[k] = v;
    body.request_id = res.locals.requestId;
    return body;
  }

  function sendError(res: Response, err: unknown) {
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
    const status = ERRORS[code].status;
    if (code === 'E_QUEUE_FULL' || code === 'E_STARTING' || code === 'E_DRAINING' || code === 'E_SIDECAR_FAILED' || code === 'E_CLOSED') {
      res.setHeader('Retry-After', String(retryAfterSeconds(code)));
    }
    // A body we did not read to the end (too large, refused early) is not drained on a kept-alive connection.
    if (draining || !res.req.complete) res.setHeader('Connection', 'close');
    res.locals.errorCode = code;
    res.status(status).json(errorBody(res, code, message, details));
  }

  function retryAfterSeconds(code: ErrorCode): number {
    if (code === 'E_QUEUE_FULL') return Math.max(1, Math.ceil(((admitted + engine.depth + 1) * (forwardEwmaMs || 1000)) / 1000));
    return STARTING_RETRY_AFTER_S;
  }

  /**
   * An error from the backend or the stages after it: its own status when that is not 500, else the contract's
   * `inference failed: <Type>: <text>`. Type is the sidecar's wire code (e.g. E_FORWARD) when there is one,
   * else the error code or the JS error name.
   */
  function inferenceError(e: unknown): RfdetrError {
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

  function notServing(): RfdetrError | undefined {
    if (draining) return new RfdetrError('E_DRAINING', 'the server is shutting down (draining) and accepts no new requests: retry on another replica');
    switch (state) {
      case 'ready':
        return undefined;
      case 'failed':
        return new RfdetrError('E_SIDECAR_FAILED', `the engine failed and is not restarting${extras.failure ? ` (${extras.failure.message})` : ' (see the server log)'}: the process should be restarted`);
      case 'stopped':
        return new RfdetrError('E_CLOSED', 'the engine is stopped: the server is shutting down');
      case 'restarting':
        return new RfdetrError('E_STARTING', 'the engine is restarting after a failure: retry in a few seconds');
      default:
        return new RfdetrError('E_STARTING', 'the model is starting (loading weights and warming up): retry in a few seconds; GET /ready answers 200 once it can serve');
    }
  }

  // ---- app ---------------------------------------------------------------------------------------------

  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', 'simple');

  app.use((req: Request, res: Response, next: NextFunction) => {
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
  });

  function logRequest(req: Request, res: Response, t0: number, finished: boolean) {
    const route: string = res.locals.route ?? 'unmatched';
    const ms = performance.now() - t0;
    const status = finished ? res.statusCode : 499;
    metrics.requests.inc({ route, method: req.method, status: String(status) });
    metrics.requestDuration.observe({ route }, ms / 1000);
    if (route === '/metrics' || route === '/tt-liveness' || route === '/health' || route === '/ready' || route === '/v1/health') {
      // Probes and scrapes arrive every few seconds; they are logged at debug so they do not drown the log.
      if (logger.level !== 'debug') return;
    }
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

  const route = (path: string) => (_req: Request, res: Response, next: NextFunction) => {
    res.locals.route = path;
    next();
  };

  app.get('/health', route('/health'), (_req, res) => {
    res.json({ status: state === 'ready' ? 'ok' : 'starting', model: MODEL_NAME, device: backend.info?.device ?? null });
  });

  app.get('/tt-liveness', route('/tt-liveness'), (_req, res) => {
    // Lock-free and engine-free: only cached fields, so it answers while a forward runs.
    res.json({
      status: 'alive',
      model_ready: state === 'ready' && !draining,
      engine_state: state,
      draining,
      model: MODEL_ID,
      uptime_s: (Date.now() - startedAt) / 1000,
      queue_depth: admitted + engine.depth,
      in_flight: active.size,
    });
  });

  const readiness = (_req: Request, res: Response) => {
    const why = notServing();
    if (why) return sendError(res, why);
    res.json({});
  };
  app.get('/ready', route('/ready'), readiness);
  app.get('/v1/health', route('/v1/health'), readiness);

  app.get('/v1/models', route('/v1/models'), (_req, res) => {
    res.json({ object: 'list', data: [{ id: opts.modelId ?? MODEL_ID, object: 'model', owned_by: 'changh95' }] });
  });

  app.get('/info', route('/info'), (_req, res) => {
    const info = backend.info;
    const lbl = labels();
    res.json({
      model: MODEL_NAME,
      model_id: opts.modelId ?? MODEL_ID,
      task: 'object-detection',
      state,
      hardware: {
        engine: info?.engine ?? null,
        device: info?.device ?? null,
        host_cpu: os.cpus()[0]?.model ?? null,
        host_cores: os.availableParallelism(),
      },
      weights: opts.weights ?? null,
      sidecar: info ? { version: info.sidecarVersion, protocol_version: info.protocolVersion } : null,
      source: {
        server: 'rfdetr-serve',
        reference: { repo: 'roboflow/rf-detr', commit: '35ac6ab64634e188bbb0fa3fc5135132f0df45fc' },
        tt_port: { repo: 'changh95/tt-RF-DETR', commit: '5b0149869465892477141b4c1dfc4622db0d1ec5' },
      },
      input: {
        input_size: INPUT_SIZE,
        images_per_request: 1,
        batch: 1,
        max_image_side: pipeline.maxImageSide,
        max_image_bytes: pipeline.maxImageBytes,
        max_body_bytes: limits.maxBodyBytes,
        formats: ['application/json (base64 image)', 'multipart/form-data (image file)', 'image/* raw body'],
        num_queries: info?.numQueries ?? 300,
        num_classes: info?.numClasses ?? 91,
      },
      serving: { queue_size: queueSize, deadline_ms: deadlineMs, prep_concurrency: prepConcurrency, engine_concurrency: engineConcurrency },
      labels: Object.fromEntries(lbl.map((l, i) => [String(i), l])),
      device_params: { ...(info ? { engine: info.engine, device: info.device, input_shape: info.inputShape } : {}), ...(opts.deviceParams ?? {}) },
    });
  });

  app.get('/metrics', route('/metrics'), async (_req, res) => {
    metrics.engineBusySeconds.inc(Math.max(0, engine.busyMs() - lastBusyMs) / 1000);
    lastBusyMs = engine.busyMs();
    updateDepth();
    res.setHeader('Content-Type', metrics.registry.contentType);
    res.send(await metrics.registry.metrics());
  });

  let openapiDoc: object | undefined;
  app.get('/openapi.json', route('/openapi.json'), (_req, res) => {
    openapiDoc ??= buildOpenApi({ maxImageBytes: pipeline.maxImageBytes, maxImageSide: pipeline.maxImageSide, maxBodyBytes: limits.maxBodyBytes });
    res.json(openapiDoc);
  });

  app.post('/predict', route('/predict'), (req, res) => {
    void handlePredict(req, res);
  });

  // Known paths with the wrong method → 405 with Allow; anything else → 404.
  const METHODS: Record<string, string> = {
    '/health': 'GET', '/tt-liveness': 'GET', '/ready': 'GET', '/v1/health': 'GET', '/v1/models': 'GET',
    '/info': 'GET', '/metrics': 'GET', '/openapi.json': 'GET', '/predict': 'POST',
  };
  app.use((req: Request, res: Response) => {
    const allow = METHODS[req.path];
    if (allow && !(req.method === 'HEAD' && allow === 'GET')) {
      res.locals.route = req.path;
      res.setHeader('Allow', allow);
      return sendError(res, new RfdetrError('E_METHOD_NOT_ALLOWED', `Expected ${allow} for ${req.path} but received ${req.method}`));
    }
    sendError(res, new RfdetrError('E_NOT_FOUND', `no route ${req.method} ${req.path}: the routes are ${Object.entries(METHODS).map(([p, m]) => `${m} ${p}`).join(', ')} (see GET /openapi.json)`));
  });

  app.use((err: unknown, _req: Request, res: Response, _next: NextFunction) => {
    sendError(res, err);
  });

  // ---- /predict ----------------------------------------------------------------------------------------

  async function handlePredict(req: Request, res: Response) {
    const t0: number = res.locals.t0;
    const refuse = notServing();
    if (refuse) return sendError(res, refuse);
    if (admitted + engine.depth >= queueSize) {
      return sendError(res, new RfdetrError('E_QUEUE_FULL', `the request queue is full (${queueSize} requests waiting for the engine, --queue-size): retry after the Retry-After delay`, { queue_size: queueSize }));
    }
    admitted++;
    let inEngineQueue = false;
    const leaveAdmission = () => {
      if (!inEngineQueue) {
        inEngineQueue = true;
        admitted--;
      }
    };
    const abort = new AbortController();
    let finish!: () => void;
    const ctx: PredictContext = { id: res.locals.requestId, t0, abort, done: new Promise((r) => (finish = r)) };
    active.add(ctx);
    updateDepth();
    const onClose = () => {
      if (!res.writableFinished) abort.abort(abortedError('in progress'));
    };
    res.on('close', onClose);
    const deadlineAt = t0 + deadlineMs;
    let deadlineTimer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_, reject) => {
      deadlineTimer = setTimeout(() => {
        // Once handed to the engine queue, its own timer (same deadline) answers, saying where the request was.
        if (inEngineQueue) return;
        const err = deadlineError(deadlineMs, 'being received, decoded or preprocessed');
        abort.abort(err);
        reject(err);
      }, Math.max(0, deadlineAt - performance.now()));
    });
    const aborted = new Promise<never>((_, reject) => {
      abort.signal.addEventListener('abort', () => reject(abort.signal.reason), { once: true });
    });
    deadline.catch(() => {});
    aborted.catch(() => {});
    try {
      const body = await Promise.race([run(), deadline, aborted]);
      if (!res.writableEnded && !res.destroyed) {
        if (draining) res.setHeader('Connection', 'close');
        const t = res.locals.timing as Record<Stage, number> | undefined;
        if (t) res.setHeader('Server-Timing', STAGES.map((k) => `${k};dur=${t[k]}`).join(', '));
        res.json(body);
      }
    } catch (e) {
      if (!res.destroyed) sendError(res, e);
    } finally {
      clearTimeout(deadlineTimer);
      leaveAdmission();
      res.off('close', onClose);
      active.delete(ctx);
      updateDepth();
      finish();
    }

    async function run() {
      const signal = abort.signal;
      const form = bodyFormOf(req);
      const input: PredictInput = await readBody(req, res, form);
      const tBody = performance.now();
      const release = await prep.acquire(signal, () => signal.reason as Error);
      updateDepth();
      const tPrep0 = performance.now();
      let decodeMs: number, preprocessMs: number;
      let pixels: Float32Array;
      let width: number, height: number;
      try {
        if (signal.aborted) throw signal.reason;
        if (pool) {
          const r = await pool.run(input.image);
          ({ pixels, width, height, decodeMs, preprocessMs } = r);
        } else {
          const img = await pipeline.decode(input.image);
          const tDecoded = performance.now();
          decodeMs = tDecoded - tPrep0;
          if (signal.aborted) throw signal.reason;
          ({ width, height } = img);
          pixels = await pipeline.preprocess(img);
          preprocessMs = performance.now() - tDecoded;
        }
      } catch (e) {
        if (isRfdetrError(e) || e === signal.reason) throw e;
        throw new RfdetrError('E_IMAGE_UNDECODABLE', `image could not be decoded: ${(e as Error)?.message ?? String(e)}: expected PNG or JPEG bytes`, undefined, { cause: e });
      } finally {
        release();
      }
      // Waiting for a prep slot, plus the hand-off to and from a worker.
      const prepWaitMs = performance.now() - tBody - decodeMs - preprocessMs;
      if (signal.aborted) throw signal.reason;
      leaveAdmission();
      let out: EngineRun;
      try {
        const p = engine.run(pixels, { signal, deadlineAt, deadlineMs });
        updateDepth();
        out = await p;
      } catch (e) {
        throw inferenceError(e);
      }
      forwardEwmaMs = forwardEwmaMs === 0 ? out.forwardMs : 0.8 * forwardEwmaMs + 0.2 * out.forwardMs;
      const tPost0 = performance.now();
      let detections: Detection[];
      let raw: { logits: number[][]; pred_boxes: number[][] } | undefined;
      try {
        const rawOut: RawOutputs = { logits: out.logits, predBoxes: out.predBoxes, numQueries: backend.info?.numQueries ?? 300, numClasses: backend.info?.numClasses ?? 91 };
        detections = pipeline.postprocess(rawOut, { threshold: input.params.threshold, maxDetections: input.params.maxDetections, width, height, labels: labels() });
        if (input.params.returnRaw) raw = pipeline.rawToNested(rawOut);
      } catch (e) {
        throw inferenceError(e);
      }
      const tEnd = performance.now();
      const timing: Record<Stage, number> = {
        decode: decodeMs,
        preprocess: preprocessMs,
        inference: out.forwardMs,
        postprocess: tEnd - tPost0,
        total: tEnd - t0,
        // Waiting: for a decode slot (and the worker hand-off), then for the engine.
        queue: out.queueMs + Math.max(0, prepWaitMs),
        transfer: out.transferMs,
      };
      metrics.observeStages(timing);
      res.locals.timing = timing;
      res.locals.numDetections = detections.length;
      return buildPredictResponse({ detections, width, height, threshold: input.params.threshold, timing, raw });
    }
  }

  // ---- lifecycle ---------------------------------------------------------------------------------------

  function listen(host: string, port: number): Promise<ListenResult> {
    if (httpServer) return Promise.reject(new Error('listen() was already called on this server'));
    if (draining) return Promise.reject(new Error('the server is draining; create a new one'));
    const server = http.createServer(app);
    httpServer = server;
    // Serving begins warm: the image workers have loaded before the port opens.
    const warm = pool ? pool.ready : Promise.resolve();
    // Uploads of a 46 MB body on a slow link still fit; a stalled client is cut after 5 minutes.
    server.requestTimeout = 300_000;
    server.headersTimeout = 60_000;
    server.keepAliveTimeout = 5_000;
    return warm.then(() => new Promise<ListenResult>((resolve, reject) => {
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
        logger.log('info', `listening on ${listening.url}`, { event: 'listening', url: listening.url, engine_state: state });
        maybeLogReady();
        resolve(listening);
      });
    }), (e: Error) => {
      httpServer = undefined;
      throw e;
    });
  }

  function drain(drainDeadlineMs: number): Promise<void> {
    drainPromise ??= (async () => {
      draining = true;
      logger.log('info', 'draining: readiness is 503, no new requests accepted', { event: 'draining', in_flight: active.size, deadline_ms: drainDeadlineMs });
      const closed = httpServer
        ? new Promise<void>((r) => httpServer!.close(() => r()))
        : Promise.resolve();
      httpServer?.closeIdleConnections();
      let timer: NodeJS.Timeout | undefined;
      const timedOut = await Promise.race([
        Promise.all([...active].map((c) => c.done)).then(() => false),
        new Promise<boolean>((r) => (timer = setTimeout(() => r(true), Math.max(0, drainDeadlineMs)))),
      ]);
      clearTimeout(timer);
      if (timedOut) {
        const err = new RfdetrError('E_DRAINING', `the server is shutting down and the ${drainDeadlineMs} ms drain deadline passed before this request finished: retry on another replica`);
        logger.log('warn', 'drain deadline passed; answering the remaining requests with 503', { event: 'drain_timeout', remaining: active.size });
        engine.rejectWaiting(err);
        for (const c of active) c.abort.abort(err);
        await Promise.all([...active].map((c) => c.done));
        backend.destroy(err);
      } else {
        try {
          await backend.close();
        } catch (e) {
          logger.log('error', `closing the backend failed: ${(e as Error).message}`, { event: 'backend_close_failed' });
        }
      }
      await pool?.close();
      clearInterval(poll);
      if (typeof extras.off === 'function') extras.off('state', stateListener);
      onState(backend.state);
      httpServer?.closeAllConnections();
      await closed;
      logger.log('info', 'drained', { event: 'drained', timed_out: timedOut });
    })();
    return drainPromise;
  }

  return {
    app,
    metrics,
    listen,
    drain,
    get draining() {
      return draining;
    },
    engine,
  };
}
