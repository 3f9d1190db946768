// The HTTP server: the reference FastAPI app's contract (/health, /info, /v1/models, /predict) plus the probes, metrics and
// limits serving users expect (/tt-liveness, /ready, /v1/health, /metrics, /openapi.json, /docs). This file wires the
// rooms together; each has its own file, named with its job in index.ts.
// Library code: the CLI owns signals and exit codes and calls drain() on SIGTERM.
import os from 'node:os';
import express, { type NextFunction, type Request, type Response } from 'express';
import { drainingError, RfdetrError, type ErrorCode } from '../errors.ts';
import { MAX_IMAGE_BYTES, MAX_IMAGE_SIDE, decodeImage, type DecodeOptions, type RgbImage } from '../image/decode.ts';
import { createUrlFetcher } from '../image/fetch-url.ts';
import type { DecodePriority, MainPriority } from '../image/decode-priority.ts';
import type { InferenceBackend } from '../sidecar/backend.ts';
import { Admission, DEFAULT_LIMITS, clientShareOf } from './admission.ts';
import { ApiKeys, requireApiKey } from './auth.ts';
import { clientIdOf } from './client-id.ts';
import { connectionGuard } from './connection-guard.ts';
import { bodyLimitFor, createBodyReader } from './body.ts';
import type { EngineQueue } from './engine-queue.ts';
import { createLifecycle, type ListenResult } from './lifecycle.ts';
import { createJsonLogger, type Logger, type LogLevel } from './log.ts';
import { ServerMetrics } from './metrics.ts';
import { createPredictHandler } from './predict.ts';
import { createRequestListener } from './predict-route.ts';
import type { ActivePredict } from './active.ts';
import { IdleCollector, exposedGc } from './idle-gc.ts';
import { registerProbes, type WeightsInfo } from './probes.ts';
import type { ModelIdentity } from './model-identity.ts';
import { createVideoHandler, type OpenVideo } from './predict-video.ts';
import { DEFAULT_VIDEO_LIMITS, videoDiskLimitOf, type VideoLimits } from './video-limits.ts';
import { VideoUploads, type UploadClock } from './video-uploads.ts';
import { openVideo } from '../video/source.ts';
import { registerDocs } from './docs.ts';
import { ROUTES } from './openapi.ts';
import { createErrorResponder } from './respond.ts';
import { createModelResolver } from './served-models.ts';
import type { ModelLane, ModelLanes, ModelSpec } from './model-lanes.ts';
import { createServerLanes } from './server-lanes.ts';
import { isAdminPath, registerAdminRoutes, type AdminOptions } from './admin.ts';
import { isRoboflowPath, registerRoboflowRoutes, roboflowErrorBody } from './compat-roboflow.ts';
import { deepstackErrorBody, isDeepstackPath, registerDeepstackRoutes } from './compat-deepstack.ts';
import { inputSizeOf } from '../detect/pipeline.ts';
import { requestLog, route } from './request-log.ts';
import { Timelines, type TimelineRecord } from './timeline.ts';

export { type WeightsInfo } from './probes.ts';
export type { ModelSpec, ModelLane, ModelLanes } from './model-lanes.ts';
export { MODEL_ID, MODEL_NAME, modelIdentityOf, type ModelIdentity } from './model-identity.ts';
export type { ListenResult } from './lifecycle.ts';

export interface CreateServerOptions {
  /** The one model's backend (its variant named by `model`, its weights by `weights`); or `models` for several. */
  backend?: InferenceBackend;
  /**
   * Several models, each its own backend and engine queue behind one admission, memory budget and decode slots;
   * the first is the default. Instead of `backend`/`model`/`weights`.
   */
  models?: ModelSpec[];
  /** How many models must be ready for /ready (and `status: ok`). Default: all of them. */
  minReady?: number;
  /** POST /admin/reload: off without it; its own keys (never the API keys), and what a reload does. */
  admin?: AdminOptions;
  /** Bytes → RGB u8 (default src/image's decodeImage); tests slow or count it. */
  decode?: (bytes: Uint8Array, opts: DecodeOptions) => Promise<RgbImage>;
  weights?: WeightsInfo;
  /** COCO-91 labels by class index, used when the backend's hello carries none. */
  labels?: readonly string[];
  /** A full garbage collection once the server has been quiet this long after traffic (idle-gc.ts); 0 = never. Default 10000. */
  idleGcMs?: number;
  /** Images admitted and not yet on the engine (one client: half); more → 503. Default 32. */
  queueSize?: number;
  /** Per-request deadline from arrival to response, ms; → 504. Default 60000. */
  deadlineMs?: number;
  /** Images decoded at once. Default min(4, available cores). */
  prepConcurrency?: number;
  /** Request bodies received at once; more → 503. Default 256. */
  maxBodies?: number;
  /** A /predict body must arrive within this many ms → else 408 and the connection closes. Default 30000. */
  bodyTimeoutMs?: number;
  /** Bytes all requests together may hold: bodies, downloads, decoded pixels, annotated output. Default 1 GiB. */
  memoryLimit?: number;
  /** API keys; none (or absent): every route is open. */
  apiKeys?: ApiKeys;
  /** With keys on, /metrics answers without one. */
  openMetrics?: boolean;
  /** With keys on, /docs and /openapi.json answer without one. */
  openDocs?: boolean;
  /** X-Forwarded-For's last entry names the client (a proxy in front sets it). Default false. */
  trustProxy?: boolean;
  /** What `lowerDecodePriority` (src/image/decode-priority.ts) did at start-up, for /info; absent: not called. */
  decodePriority?: DecodePriority;
  /** What `lowerMainPriority` (--server-nice) did once the sidecars ran, for /info; absent: not called. */
  mainPriority?: MainPriority;
  /** serve --engine-nice: the nice value the spawned sidecar was asked for (null: an external sidecar). */
  engineNice?: number | null;
  /** Requests in flight on one connection (pipelining); more → 503 and the connection closes. Default 2. */
  maxRequestsPerConnection?: number;
  /** A response must be written within this many ms of its first byte, else the connection is dropped. Default 30000. */
  sendTimeoutMs?: number;
  /**
   * Requests handed to the sidecar at once. Default 2: the sidecar resizes request N+1 while N is on the
   * engine; forwards still run one at a time, in order.
   */
  engineConcurrency?: number;
  logger?: Logger;
  /** Used only when `logger` is not given. Default "info". */
  logLevel?: LogLevel;
  /** Extra fields for /info's "device_params" (thread count, device id, …). */
  deviceParams?: Record<string, unknown>;
  /**
   * The loaded variant's name and id (modelIdentityOf). Default RF-DETR-base, Roboflow/rf-detr-base. A function
   * is asked at every request: an external sidecar's variant is known only from its hello, after the server listens.
   */
  model?: ModelIdentity | (() => ModelIdentity);
  /** Hosts image_url may name (--allow-url-host); empty or absent: image_url is off. */
  allowUrlHosts?: readonly string[];
  /** Time limit of one image_url fetch, ms. Default 10000. */
  urlTimeoutMs?: number;
  /** Register prom-client's process metrics (CPU, memory, event loop lag). Default true. */
  defaultMetrics?: boolean;
  /** POST /predict/video limits (bytes, duration, frames, videos at once, upload time). */
  videoLimits?: Partial<VideoLimits>;
  /** Opens an uploaded video (default: ffprobe + ffmpeg, src/video); tests script it. */
  openVideo?: OpenVideo;
  /** Where uploaded videos are written while they run (default os.tmpdir()). */
  videoTmpRoot?: string;
  /** The clock of video uploads' minimum rate and timeout (default the system's; tests move one by hand). */
  videoClock?: UploadClock;
  /** Called with each finished /predict request's timeline (src/http/timeline.ts): the bench reads it. */
  onTimeline?: (t: TimelineRecord) => void;
}

export interface RfdetrServer {
  app: express.Express;
  metrics: ServerMetrics;
  /** Starts the HTTP listener; logs READY_MESSAGE once the backend is ready too. */
  listen(host: string, port: number): Promise<ListenResult>;
  /**
   * Readiness 503 and new requests 503 at once; requests in flight finish for up to `deadlineMs`, then the
   * rest are answered 503, the backend is closed (destroyed if the deadline passed) and the listener closes.
   * Idempotent.
   */
  drain(deadlineMs: number): Promise<void>;
  readonly draining: boolean;
  /** The first model's engine queue (for tests and the bench: depth, busy time, forward count). */
  readonly engine: EngineQueue;
  /** The models served (a reload puts and removes them). */
  readonly models: ModelLanes;
  /** The budgets (for tests and the bench). */
  readonly admission: Admission;
  /** Video uploads arriving (for tests and the bench). */
  readonly videoUploads: VideoUploads;
}

const STARTING_RETRY_AFTER_S = 5;

export function createServer(opts: CreateServerOptions): RfdetrServer {
  const deadlineMs = opts.deadlineMs ?? 60_000;
  const engineConcurrency = opts.engineConcurrency ?? 2;
  for (const [name, v] of [['deadlineMs', deadlineMs], ['engineConcurrency', engineConcurrency]] as const) {
    if (!Number.isInteger(v) || v < 1) throw new RangeError(`Expected an integer >= 1 for ${name} but received ${String(v)}`);
  }
  const queueSize = opts.queueSize ?? DEFAULT_LIMITS.queueSize;
  const admission = new Admission({
    queueSize,
    clientShare: clientShareOf(queueSize),
    maxBodies: opts.maxBodies ?? DEFAULT_LIMITS.maxBodies,
    bodyTimeoutMs: opts.bodyTimeoutMs ?? DEFAULT_LIMITS.bodyTimeoutMs,
    decodeConcurrency: opts.prepConcurrency ?? Math.max(1, Math.min(4, os.availableParallelism())),
    memoryLimit: opts.memoryLimit ?? DEFAULT_LIMITS.memoryLimit,
  });
  const apiKeys = opts.apiKeys ?? new ApiKeys();
  const logger = opts.logger ?? createJsonLogger(opts.logLevel ?? 'info');
  const metrics = new ServerMetrics({ defaultMetrics: opts.defaultMetrics });
  const limits = { maxImageBytes: MAX_IMAGE_BYTES, maxImageSide: MAX_IMAGE_SIDE, maxBodyBytes: bodyLimitFor(MAX_IMAGE_BYTES) };
  const active = new Set<ActivePredict>();
  const specs: ModelSpec[] = opts.models ?? (opts.backend ? [{ backend: opts.backend, model: opts.model, weights: opts.weights }] : []);
  if (specs.length === 0) throw new RangeError('Expected `backend` or a non-empty `models` for createServer but received neither');
  const served = createServerLanes({ specs, minReady: opts.minReady, metrics, engineConcurrency, fallbackLabels: opts.labels ?? [] });
  const { lanes, sum } = served;
  const first = () => lanes.default;
  let draining = false;

  // Past their body and not yet handed to the sidecar: decoding, waiting for a decode slot or for the engine.
  const waitingForEngine = () => admission.queued;
  // The gauges and the busy counter are brought up to date when /metrics is scraped (refreshGauges), the only
  // reader: updating them at each of a request's hand-offs (~10 labelled gauge sets per /predict) cost its
  // path time and told nobody anything (bench/server/RESULTS.md §9).
  const updateGauges = () => {
    metrics.queueDepth.set({ stage: 'admitted' }, waitingForEngine());
    metrics.queueDepth.set({ stage: 'prep' }, admission.decodes.waiting);
    metrics.queueDepth.set({ stage: 'engine' }, sum((l) => l.engine.depth));
    for (const l of lanes.list()) metrics.modelQueueDepth.set({ model: l.id }, l.engine.depth);
    metrics.inFlight.set(active.size);
    metrics.engineForwardsInFlight.set(sum((l) => l.engine.inFlight));
    metrics.videoUploads.set(videoUploads.arriving);
    metrics.videoUploadBytes.set(videoUploads.diskBytes);
  };

  const retryAfterS = (code: ErrorCode) => code === 'E_QUEUE_FULL'
    ? Math.max(1, Math.ceil(((admission.queued + sum((l) => l.engine.inFlight) + 1) * (served.forwardEwmaMs() || 1000)) / 1000))
    : STARTING_RETRY_AFTER_S;
  const errors = createErrorResponder(retryAfterS, () => draining);
  // Other servers' APIs answer errors in their own shape, from the key check to the 404 (compat-*.ts).
  const roboflowErrors = createErrorResponder(retryAfterS, () => draining, roboflowErrorBody);
  const deepstackErrors = createErrorResponder(retryAfterS, () => draining, deepstackErrorBody);
  const errorsFor = (path: string) => (isRoboflowPath(path) ? roboflowErrors : isDeepstackPath(path) ? deepstackErrors : errors);
  // Before a request's body: a model its query string names must be served (404), and some model must be able to
  // serve (else the first one's reason: draining, starting, failed).
  const notServing = (name: string | undefined) => {
    if (name !== undefined) return lanes.resolve(name).engineState.notServing();
    const why = lanes.list().map((l) => l.engineState.notServing());
    return why.some((w) => w === undefined) ? undefined : why[0];
  };
  // /ready: at least --min-ready models ready, and not draining.
  const notReady = () => {
    if (draining) return drainingError('(draining) and accepts no new requests');
    if (lanes.readyCount() >= lanes.minReady) return undefined;
    const waiting = lanes.list().filter((l) => l.engineState.state !== 'ready');
    if (lanes.list().length === 1) return waiting[0]!.engineState.notServing();
    return new RfdetrError('E_STARTING', `${lanes.readyCount()} of ${lanes.list().length} models are ready and ${lanes.minReady} must be (--min-ready): not ready ${waiting.map((l) => `${l.id} (${l.engineState.state}${l.backend.failureReason ? `: ${l.backend.failureReason}` : ''})`).join(', ')}; GET /health lists each model's state`);
  };

  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', 'simple');
  // /predict/ and /PREDICT are not /predict: one spelling per route, so a proxy's path rules mean what they say.
  app.set('strict routing', true);
  app.set('case sensitive routing', true);
  // Every route's middlewares; POST /predict also runs them ahead of the router (predict-route.ts).
  const common = [
    requestLog(logger, metrics),
    connectionGuard({ maxInFlight: opts.maxRequestsPerConnection ?? 2, sendTimeoutMs: opts.sendTimeoutMs ?? 30_000, send: (res, e) => errors.send(res, e) }),
    requireApiKey({
      keys: apiKeys, openMetrics: opts.openMetrics, openDocs: opts.openDocs,
      keyFieldRoutes: (path) => isRoboflowPath(path) || isDeepstackPath(path),
      ownKeyRoutes: (path) => opts.admin !== undefined && isAdminPath(path),
      send: (res, e) => errorsFor(res.req.path).send(res, e),
    }),
  ];
  for (const mw of common) app.use(mw);

  registerProbes(app, {
    lanes, notReady, draining: () => draining, metrics, logger, errors, limits,
    startedAt: Date.now(),
    serving: {
      queue_size: admission.limits.queueSize, client_queue_share: admission.limits.clientShare, deadline_ms: deadlineMs,
      prep_concurrency: admission.limits.decodeConcurrency, engine_concurrency: engineConcurrency, max_bodies: admission.limits.maxBodies,
      body_timeout_ms: admission.limits.bodyTimeoutMs, memory_limit_bytes: admission.memory.limit,
      max_image_work_bytes: admission.memory.maxWorkPerImage,
      allow_url_hosts: [...(opts.allowUrlHosts ?? [])],
      api_keys: apiKeys.enabled, trust_proxy: opts.trustProxy === true,
      decode_nice: opts.decodePriority ?? null,
      server_nice: opts.mainPriority ?? null,
      engine_nice: opts.engineNice ?? null,
      min_ready: lanes.minReady,
      admin_reload: opts.admin !== undefined,
    },
    deviceParams: opts.deviceParams ?? {},
    inFlight: () => active.size,
    waiting: waitingForEngine,
    refreshGauges: () => {
      for (const l of lanes.list()) l.engineState.refresh();
      served.accountBusy();
      updateGauges();
    },
  });

  registerDocs(app);

  const decode = opts.decode ?? decodeImage;
  const timelines = new Timelines();
  const bodyReader = createBodyReader({ maxImageBytes: limits.maxImageBytes, maxBodyBytes: limits.maxBodyBytes });
  const laneDeps = (lane: ModelLane) => served.laneDeps(lane, { admission, metrics, deadlineMs, decode: (bytes, o) => decode(bytes, o) });
  const handlePredict = createPredictHandler({
    lanes, laneDeps, notServing, draining: () => draining, admission, metrics, errors, deadlineMs,
    readBody: bodyReader,
    decode: (bytes, o) => decode(bytes, o),
    fetchUrl: opts.allowUrlHosts?.length ? createUrlFetcher({ allowHosts: opts.allowUrlHosts, maxBytes: limits.maxImageBytes, timeoutMs: opts.urlTimeoutMs }) : undefined,
    clientOf: (req, res) => clientIdOf(req, res, opts.trustProxy === true),
    timelines,
    onTimeline: opts.onTimeline,
  }, active);
  const predictRoute = [route('/predict'), (req: Request, res: Response) => void handlePredict(req, res)];
  app.post('/predict', ...predictRoute);
  // The clients of other servers, on the same pipeline (admission, budgets, fair share, deadline, engine).
  const models = createModelResolver(lanes);
  const compat = { models, keys: apiKeys, limits: { maxImageBytes: limits.maxImageBytes, maxBodyBytes: limits.maxBodyBytes }, handlePredict };
  registerRoboflowRoutes(app, { ...compat, readJson: bodyReader.jsonValue, errors: roboflowErrors });
  registerDeepstackRoutes(app, { ...compat, bodyTimeoutMs: admission.limits.bodyTimeoutMs, errors: deepstackErrors });
  const videoLimits: VideoLimits = { ...DEFAULT_VIDEO_LIMITS, ...opts.videoLimits };
  const videoUploads = new VideoUploads({
    maxUploads: videoLimits.maxUploads, clientUploads: videoLimits.clientUploads,
    diskLimit: videoLimits.diskLimit ?? videoDiskLimitOf(videoLimits.maxBytes),
    minRate: videoLimits.minUploadRate, graceMs: videoLimits.uploadGraceMs, timeoutMs: videoLimits.bodyTimeoutMs,
  }, opts.videoClock, (reason) => metrics.videoUploadsRefused.inc({ reason }));
  if (videoUploads.limits.diskLimit < 2 * videoLimits.maxBytes) {
    throw new RangeError(`Expected --video-disk-limit (${videoUploads.limits.diskLimit}) >= 2 x --video-max-bytes (${videoLimits.maxBytes}): a video at the byte limit must fit in one client's half of the disk budget`);
  }
  const handleVideo = createVideoHandler({
    lanes, laneDeps, notServing, admission, metrics, errors, deadlineMs,
    decode: (bytes, o) => decode(bytes, o),
    limits: videoLimits,
    uploads: videoUploads,
    openVideo: opts.openVideo ?? openVideo,
    tmpRoot: opts.videoTmpRoot,
    logger,
    clientOf: (req, res) => clientIdOf(req, res, opts.trustProxy === true),
  }, active);
  if (opts.admin) registerAdminRoutes(app, { ...opts.admin, errors });
  app.post('/predict/video', route('/predict/video'), (req, res) => {
    void handleVideo(req, res);
  });

  // Known paths with the wrong method → 405 with Allow; anything else → 404.
  const METHODS: Record<string, string> = ROUTES;
  app.use((req: Request, res: Response) => {
    const allow = METHODS[req.path];
    if (allow && !(req.method === 'HEAD' && allow === 'GET')) {
      res.locals.route = req.path;
      res.setHeader('Allow', allow);
      return errors.send(res, new RfdetrError('E_METHOD_NOT_ALLOWED', `Expected ${allow} for ${req.path} but received ${req.method}`));
    }
    errors.send(res, new RfdetrError('E_NOT_FOUND', `no route ${req.method} ${req.path}: the routes are ${Object.entries(METHODS).map(([p, m]) => `${m} ${p}`).join(', ')} (see GET /openapi.json)`));
  });
  app.use((err: unknown, req: Request, res: Response, _next: NextFunction) => {
    errorsFor(req.path).send(res, err);
  });

  const handle = createRequestListener(app, [...common, ...predictRoute], (res, e) => errors.send(res, e));
  let requests = 0;
  const idleGcMs = opts.idleGcMs ?? 10_000;
  let stopIdleGc = () => {};
  if (idleGcMs > 0) {
    const gc = exposedGc();
    if (gc instanceof Error) logger.log('warn', `the idle garbage collection is off: ${gc.message}`, { event: 'idle_gc_unavailable' });
    else stopIdleGc = new IdleCollector({ activity: () => requests, busy: () => active.size > 0 || sum((l) => l.engine.inFlight) > 0, collect: gc }).start(idleGcMs);
  }
  const lifecycle = createLifecycle({
    app, listener: (req, res) => {
      requests++;
      handle(req, res);
    }, lanes, logger, active,
    serving: () => notReady() === undefined,
    readyFields: { queue_size: admission.limits.queueSize, deadline_ms: deadlineMs },
  });
  const drain = (ms: number) => {
    draining = true;
    stopIdleGc();
    return lifecycle.drain(ms);
  };

  return {
    app,
    metrics,
    listen: lifecycle.listen,
    drain,
    get draining() {
      return draining;
    },
    get engine() {
      return first().engine;
    },
    models: lanes,
    admission,
    videoUploads,
  };
}
