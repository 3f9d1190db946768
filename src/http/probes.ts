// The read-only routes: /health (200 always, "ok" only when ready, as the reference app), /tt-liveness (lock-free, engine
// free), /ready and /v1/health (503 until ready and while draining), /v1/models, /info, /metrics and
// /openapi.json. Each reads cached state only, so all of them answer while a forward runs.
import os from 'node:os';
import path from 'node:path';
import type { Express, Request, Response } from 'express';
import type { InferenceBackend } from '../sidecar/backend.ts';
import { inputSizeOf } from '../detect/pipeline.ts';
import type { ModelLane, ModelLanes } from './model-lanes.ts';
import { servedModelOf } from './served-models.ts';
import type { Logger } from './log.ts';
import type { ServerMetrics } from './metrics.ts';
import { buildOpenApi } from './openapi.ts';
import { MAX_BATCH_IMAGES } from './schema.ts';
import type { ErrorResponder } from './respond.ts';
import { route } from './request-log.ts';
import type { ModelIdentity } from './model-identity.ts';

/** What /info reports about the weights; the CLI fills it from the resolved snapshot. */
export interface WeightsInfo {
  repo: string;
  revision: string | null;
  commit?: string | null;
  /** Where the files came from, e.g. "hub", "local", "synth". */
  source?: string;
  /** The checkpoint says it is synthetic (made by `rfdetr weights synth`): its detections are meaningless. */
  synthetic?: boolean;
  /** The directory; shown in /info only at debug log level (absolute paths are an operator's business). */
  dir?: string;
  /** File paths or names; /info shows the names. */
  files?: Record<string, string> | string[];
}

export interface ProbeDeps {
  /** The models served: the top-level fields describe the first, `models` lists each. */
  lanes: ModelLanes;
  /** Why the server cannot serve now (draining, or fewer than --min-ready models ready); undefined when it can. */
  notReady: () => import('../errors.ts').RfdetrError | undefined;
  draining: () => boolean;
  metrics: ServerMetrics;
  logger: Logger;
  errors: ErrorResponder;
  startedAt: number;
  limits: { maxImageBytes: number; maxImageSide: number; maxBodyBytes: number };
  serving: Record<string, unknown>;
  deviceParams: Record<string, unknown>;
  /** /predict requests between arrival and response. */
  inFlight: () => number;
  /** /predict requests admitted and not yet handed to the engine. */
  waiting: () => number;
  /** Brings the busy-time and depth gauges up to date before a scrape. */
  refreshGauges: () => void;
}

function weightsForInfo(w: WeightsInfo | undefined, debug: boolean): Record<string, unknown> | null {
  if (!w) return null;
  const names = (f: WeightsInfo['files']) => Array.isArray(f) ? f.map((p) => path.basename(p))
    : f ? Object.fromEntries(Object.entries(f).map(([k, p]) => [k, path.basename(p)])) : undefined;
  const out: Record<string, unknown> = { repo: w.repo, revision: w.revision };
  if (w.commit !== undefined) out.commit = w.commit;
  if (w.source !== undefined) out.source = w.source;
  out.synthetic = w.synthetic === true;
  if (w.files !== undefined) out.files = names(w.files);
  if (debug && w.dir !== undefined) out.dir = w.dir;
  return out;
}

/** Each sidecar of a pool, as /health and /info list them (absent for a backend that is not a pool). */
function deviceList(backend: InferenceBackend): Record<string, unknown>[] | undefined {
  return backend.devices?.().map((x) => ({
    device: x.device, state: x.state, restarts: x.restarts, last_failure: x.lastFailure, removed: x.removed, in_flight: x.inFlight,
  }));
}

/** One model as /health lists it. */
function modelStatus(l: ModelLane): Record<string, unknown> {
  const m = servedModelOf(l);
  const state = l.engineState.state;
  return {
    id: m.id, alias: m.alias, name: l.identity().name, task: m.task, input_size: m.inputSize, state,
    failure: state === 'ready' ? null : (l.backend.failureReason ?? null),
  };
}

export function registerProbes(app: Express, d: ProbeDeps): void {
  const first = () => d.lanes.default;

  app.get('/health', route('/health'), (_req, res) => {
    const { backend } = first();
    const devices = deviceList(backend);
    res.json({
      status: d.lanes.readyCount() >= d.lanes.minReady ? 'ok' : 'starting', model: first().identity().name, device: backend.info?.device ?? null,
      ...(devices ? { devices } : {}), models: d.lanes.list().map(modelStatus),
    });
  });

  app.get('/tt-liveness', route('/tt-liveness'), (_req, res) => {
    const { engineState } = first();
    res.json({
      status: 'alive',
      model_ready: d.notReady() === undefined,
      engine_state: engineState.state,
      draining: d.draining(),
      model: first().id,
      uptime_s: (Date.now() - d.startedAt) / 1000,
      queue_depth: d.waiting(),
      in_flight: d.inFlight(),
    });
  });

  const readiness = (_req: Request, res: Response) => {
    const why = d.notReady();
    if (why) return d.errors.send(res, why);
    res.json({});
  };
  app.get('/ready', route('/ready'), readiness);
  app.get('/v1/health', route('/v1/health'), readiness);

  app.get('/v1/models', route('/v1/models'), (_req, res) => {
    res.json({
      object: 'list',
      data: d.lanes.list().map((l) => {
        const m = servedModelOf(l);
        return { id: m.id, object: 'model', owned_by: 'changh95', task: m.task, input_size: m.inputSize, state: l.engineState.state };
      }),
    });
  });

  app.get('/info', route('/info'), (_req, res) => {
    const { backend, engineState } = first();
    const info = backend.info;
    const debug = d.logger.level === 'debug';
    const deviceParams = { ...d.deviceParams };
    if (!debug) delete deviceParams.sidecar_socket;
    const devices = deviceList(backend);
    res.json({
      model: first().identity().name,
      model_id: first().id,
      task: 'object-detection',
      state: engineState.state,
      hardware: {
        engine: info?.engine ?? null,
        device: info?.device ?? null,
        host_cpu: os.cpus()[0]?.model ?? null,
        host_cores: os.availableParallelism(),
      },
      weights: weightsForInfo(first().weights, debug),
      sidecar: info ? { version: info.sidecarVersion, protocol_version: info.protocolVersion, nice: info.enginePriority ?? null } : null,
      source: {
        server: 'rfdetr-serve',
        reference: { repo: 'roboflow/rf-detr', commit: '35ac6ab64634e188bbb0fa3fc5135132f0df45fc' },
        tt_port: { repo: 'changh95/tt-RF-DETR', commit: '5b0149869465892477141b4c1dfc4622db0d1ec5' },
      },
      input: {
        input_size: inputSizeOf(info),
        images_per_request: MAX_BATCH_IMAGES,
        batch: 1,
        max_image_side: d.limits.maxImageSide,
        max_image_bytes: d.limits.maxImageBytes,
        max_body_bytes: d.limits.maxBodyBytes,
        formats: ['application/json (base64 image, images: [...], or image_url when --allow-url-host is set)', 'multipart/form-data (image file)', 'image/* raw body'],
        num_queries: info?.numQueries ?? 300,
        num_classes: info?.numClasses ?? 91,
      },
      serving: d.serving,
      labels: Object.fromEntries(first().labels().map((l, i) => [String(i), l])),
      // The precision the engine runs, as its hello says (a version-2/3 sidecar does not: the flag's then).
      device_params: { ...(info ? { engine: info.engine, device: info.device, input_shape: info.inputShape } : {}), ...deviceParams, ...(info?.precision ? { precision: info.precision } : {}) },
      ...(devices ? { devices } : {}),
      models: d.lanes.list().map((l) => ({
        ...modelStatus(l), engine: l.backend.info?.engine ?? null, device: l.backend.info?.device ?? null, precision: l.backend.info?.precision ?? null,
        weights: weightsForInfo(l.weights, debug), params: l.params,
      })),
    });
  });

  app.get('/metrics', route('/metrics'), async (_req, res) => {
    d.refreshGauges();
    res.setHeader('Content-Type', d.metrics.registry.contentType);
    res.send(await d.metrics.registry.metrics());
  });

  // Rebuilt when the model changes (an external sidecar's hello arrived, or a restarted one loaded another variant).
  let openapiDoc: { model: ModelIdentity; doc: object } | undefined;
  app.get('/openapi.json', route('/openapi.json'), (_req, res) => {
    const model = first().identity();
    if (openapiDoc?.model.name !== model.name || openapiDoc.model.id !== model.id) openapiDoc = { model, doc: buildOpenApi({ ...d.limits, model }) };
    res.json(openapiDoc.doc);
  });
}
