// Prometheus metrics for one server instance (its own Registry, so several servers can live in one process,
// as in the tests). Our series are prefixed `rfdetr_`; prom-client's process_* and nodejs_* keep their standard
// names. Seconds and bytes per Prometheus convention.
import client from 'prom-client';
import type { BackendState } from '../sidecar/backend.ts';
import { UPLOAD_REFUSALS } from './video-uploads.ts';

export const STAGES = ['decode', 'preprocess', 'queue', 'transfer', 'inference', 'postprocess', 'total'] as const;
export type Stage = (typeof STAGES)[number];

const ENGINE_STATES: BackendState[] = ['starting', 'ready', 'unresponsive', 'restarting', 'failed', 'stopped'];

// From 0.25 ms (postprocess) to 60 s (a CPU forward under load): roughly ×2.5 steps.
const SECONDS_BUCKETS = [0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

export class ServerMetrics {
  readonly registry = new client.Registry();
  readonly requests: client.Counter<'route' | 'method' | 'status'>;
  readonly requestDuration: client.Histogram<'route'>;
  readonly stageSeconds: client.Histogram<'stage'>;
  readonly queueDepth: client.Gauge<'stage'>;
  readonly inFlight: client.Gauge;
  readonly engineForwardsInFlight: client.Gauge;
  readonly engineBusySeconds: client.Counter;
  readonly engineForwardSeconds: client.Counter;
  readonly sidecarRestarts: client.Counter;
  readonly engineState: client.Gauge<'state'>;
  readonly rejected: client.Counter<'code'>;
  readonly deviceState: client.Gauge<'device' | 'state'>;
  readonly deviceInFlight: client.Gauge<'device'>;
  readonly deviceForwardSeconds: client.Counter<'device'>;
  readonly deviceForwards: client.Counter<'device'>;
  readonly deviceRestarts: client.Counter<'device'>;
  readonly devicesRemoved: client.Counter;
  readonly imagesDecoded: client.Counter<'by'>;
  readonly videoUploads: client.Gauge;
  readonly videoUploadBytes: client.Gauge;
  readonly videoUploadsRefused: client.Counter<'reason'>;
  readonly modelState: client.Gauge<'model' | 'state'>;
  readonly modelForwards: client.Counter<'model'>;
  readonly modelForwardSeconds: client.Counter<'model'>;
  readonly modelQueueDepth: client.Gauge<'model'>;
  readonly modelSwaps: client.Counter<'model' | 'outcome'>;

  constructor(opts: { defaultMetrics?: boolean } = {}) {
    const registers = [this.registry];
    this.requests = new client.Counter({
      name: 'rfdetr_http_requests_total',
      help: 'HTTP requests answered, by route template, method and status code',
      labelNames: ['route', 'method', 'status'],
      registers,
    });
    this.requestDuration = new client.Histogram({
      name: 'rfdetr_http_request_duration_seconds',
      help: 'Time from request arrival to the response being written, by route template',
      labelNames: ['route'],
      buckets: SECONDS_BUCKETS,
      registers,
    });
    this.stageSeconds = new client.Histogram({
      name: 'rfdetr_predict_stage_seconds',
      help: 'Per-stage latency of successful /predict requests (the timing_ms fields): decode, preprocess, queue, transfer, inference (the engine forward), postprocess, total',
      labelNames: ['stage'],
      buckets: SECONDS_BUCKETS,
      registers,
    });
    this.queueDepth = new client.Gauge({
      name: 'rfdetr_queue_depth',
      help: 'Requests waiting: stage="admitted" (accepted, not yet handed to the engine), "prep" (waiting for a decode slot), "engine" (pixel_values ready, waiting for the engine)',
      labelNames: ['stage'],
      registers,
    });
    this.inFlight = new client.Gauge({
      name: 'rfdetr_predict_in_flight',
      help: '/predict requests being handled (any stage)',
      registers,
    });
    this.engineForwardsInFlight = new client.Gauge({
      name: 'rfdetr_engine_forwards_in_flight',
      help: 'Forwards handed to the backend and not yet finished',
      registers,
    });
    this.engineBusySeconds = new client.Counter({
      name: 'rfdetr_engine_busy_seconds_total',
      help: 'Wall time during which a request was in the sidecar (being resized or on the engine); its rate is the sidecar utilisation',
      registers,
    });
    this.engineForwardSeconds = new client.Counter({
      name: 'rfdetr_engine_forward_seconds_total',
      help: 'Sum of the engine forward times the sidecar reported (timing_ms.inference); its rate is the time the engine itself computed',
      registers,
    });
    this.sidecarRestarts = new client.Counter({
      name: 'rfdetr_sidecar_restarts_total',
      help: 'Times the backend went from ready to restarting',
      registers,
    });
    this.engineState = new client.Gauge({
      name: 'rfdetr_engine_state',
      help: 'Backend lifecycle state: 1 for the current state, 0 for the others',
      labelNames: ['state'],
      registers,
    });
    this.rejected = new client.Counter({
      name: 'rfdetr_predict_rejected_total',
      help: '/predict requests answered with an error, by error code',
      labelNames: ['code'],
      registers,
    });
    this.deviceState = new client.Gauge({
      name: 'rfdetr_device_state',
      help: 'Each sidecar\'s lifecycle state, by device (card index or worker-N): 1 for its current state, 0 for the others',
      labelNames: ['device', 'state'],
      registers,
    });
    this.deviceInFlight = new client.Gauge({
      name: 'rfdetr_device_in_flight',
      help: 'Requests handed to each sidecar and not yet answered, by device (its share of the engine queue)',
      labelNames: ['device'],
      registers,
    });
    this.deviceForwardSeconds = new client.Counter({
      name: 'rfdetr_device_forward_seconds_total',
      help: 'Sum of the engine forward times each sidecar reported, by device; its rate is that device\'s utilisation',
      labelNames: ['device'],
      registers,
    });
    this.deviceForwards = new client.Counter({
      name: 'rfdetr_device_forwards_total',
      help: 'Forwards each sidecar answered, by device',
      labelNames: ['device'],
      registers,
    });
    this.deviceRestarts = new client.Counter({
      name: 'rfdetr_device_restarts_total',
      help: 'Sidecar restarts, by device',
      labelNames: ['device'],
      registers,
    });
    this.devicesRemoved = new client.Counter({
      name: 'rfdetr_devices_removed_total',
      help: 'Sidecars taken out of the pool (restart cap reached, or could not start); the others keep serving',
      registers,
    });
    this.imagesDecoded = new client.Counter({
      name: 'rfdetr_images_decoded_total',
      help: '/predict images decoded, by where: by="server" (sharp, here), "sidecar" (the file sent to the sidecar, which decoded it), "server_after_decline" (the sidecar declined the file; decoded here, then sent again)',
      labelNames: ['by'],
      registers,
    });
    this.videoUploads = new client.Gauge({
      name: 'rfdetr_video_uploads_arriving',
      help: 'POST /predict/video uploads arriving (holding an upload place, not a video slot)',
      registers,
    });
    this.videoUploadBytes = new client.Gauge({
      name: 'rfdetr_video_upload_disk_bytes',
      help: 'bytes of video uploads on the server\'s disk (arriving, or complete and running), against --video-disk-limit',
      registers,
    });
    this.videoUploadsRefused = new client.Counter({
      name: 'rfdetr_video_uploads_refused_total',
      help: 'video uploads refused or cut off, by reason: reason="places" (--video-max-uploads or --video-client-uploads), "disk" (--video-disk-limit), "too_slow" (--video-min-upload-rate), "timeout" (the upload time limit)',
      labelNames: ['reason'],
      registers,
    });
    // Several models (serve --weights ID=DIR, --models FILE): the same facts per model id. The unlabelled series
    // above keep describing the first model (engine state) or all of them together (queues, busy time).
    this.modelState = new client.Gauge({
      name: 'rfdetr_model_state',
      help: 'Each served model\'s engine state, by model id: 1 for its current state, 0 for the others',
      labelNames: ['model', 'state'],
      registers,
    });
    this.modelForwards = new client.Counter({
      name: 'rfdetr_model_forwards_total',
      help: 'Forwards answered, by model id',
      labelNames: ['model'],
      registers,
    });
    this.modelForwardSeconds = new client.Counter({
      name: 'rfdetr_model_forward_seconds_total',
      help: 'Engine forward time of the answered forwards, by model id',
      labelNames: ['model'],
      registers,
    });
    this.modelQueueDepth = new client.Gauge({
      name: 'rfdetr_model_queue_depth',
      help: 'Images waiting in a model\'s engine queue, by model id',
      labelNames: ['model'],
      registers,
    });
    this.modelSwaps = new client.Counter({
      name: 'rfdetr_model_swaps_total',
      help: 'Model loads on a reload (SIGHUP, POST /admin/reload), by model id and outcome: "swapped" (a new checkpoint serves, the old one drained), "added", "removed", "failed" (the new one did not start; the old one, if any, keeps serving)',
      labelNames: ['model', 'outcome'],
      registers,
    });
    for (const reason of UPLOAD_REFUSALS) this.videoUploadsRefused.inc({ reason }, 0);
    for (const by of ['server', 'sidecar', 'server_after_decline']) this.imagesDecoded.inc({ by }, 0);
    for (const s of ENGINE_STATES) this.engineState.set({ state: s }, 0);
    for (const s of ['admitted', 'prep', 'engine']) this.queueDepth.set({ stage: s }, 0);
    // Unprefixed: process_* and nodejs_* are the names standard Node dashboards and alerts query.
    if (opts.defaultMetrics !== false) client.collectDefaultMetrics({ register: this.registry });
  }

  setEngineState(state: BackendState): void {
    for (const s of ENGINE_STATES) this.engineState.set({ state: s }, s === state ? 1 : 0);
  }

  setModelState(model: string, state: BackendState | null): void {
    for (const s of ENGINE_STATES) {
      if (state === null) this.modelState.remove({ model, state: s });
      else this.modelState.set({ model, state: s }, s === state ? 1 : 0);
    }
    if (state === null) this.modelQueueDepth.remove({ model });
  }

  setDeviceState(device: string, state: BackendState): void {
    for (const s of ENGINE_STATES) this.deviceState.set({ device, state: s }, s === state ? 1 : 0);
  }

  observeStages(ms: Record<Stage, number>): void {
    for (const s of STAGES) this.stageSeconds.observe({ stage: s }, ms[s] / 1000);
  }
}
