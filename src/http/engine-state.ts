// The engine's lifecycle as the HTTP server sees it: a cached copy of the backend's state (probes read this and
// never touch the backend), updated from the backend's own state-change events (the backend logs each
// transition; this copy does not log it again); restarts counted into the metrics; and the one answer to "may
// a request be served now, and if not, why".
import { drainingError, ERRORS, RfdetrError } from '../errors.ts';
import type { BackendState, InferenceBackend } from '../sidecar/backend.ts';
import type { ServerMetrics } from './metrics.ts';

export class EngineState {
  #state: BackendState;
  #restartsSeen: number;
  #draining = false;
  readonly #deviceSeen = new Map<string, { restarts: number; forwards: number; forwardSeconds: number; removed: boolean }>();
  readonly #unsubscribe: () => void;
  readonly #listeners = new Set<() => void>();

  // The unlabelled engine-state gauge follows the first model; every model has its own rfdetr_model_state series.
  #primary: boolean;
  #modelId: string | undefined;
  /** The model id its errors name (kept after detach()). */
  readonly #name: string | undefined;

  constructor(
    private readonly backend: InferenceBackend,
    private readonly metrics: ServerMetrics,
    opts: { modelId?: string; primary?: boolean } = {},
  ) {
    this.#state = backend.state;
    this.#restartsSeen = backend.restarts;
    this.#primary = opts.primary !== false;
    this.#modelId = opts.modelId;
    this.#name = opts.modelId;
    this.#publish();
    this.#updateDevices();
    this.#unsubscribe = backend.onStateChange((next) => this.#update(next));
  }

  get state(): BackendState {
    return this.#state;
  }

  get draining(): boolean {
    return this.#draining;
  }

  /** Serving can begin (the backend is ready and the server is not draining). */
  get serving(): boolean {
    return this.#state === 'ready' && !this.#draining;
  }

  /** Calls `fn` after every change of state or of draining. */
  onChange(fn: () => void): void {
    this.#listeners.add(fn);
  }

  startDraining(): void {
    this.#draining = true;
    for (const fn of this.#listeners) fn();
  }

  /** Re-reads the backend's restart count (before a metrics scrape). */
  refresh(): void {
    this.#update(this.backend.state);
  }

  /** Writes the unlabelled engine-state series from now on (a swap's replacement of the first model). */
  promote(): void {
    this.#primary = true;
    this.#publish();
  }

  /** Stops writing the engine-state series (a replaced model's: its successor writes them now). */
  detach(): void {
    this.#primary = false;
    this.#modelId = undefined;
  }

  #publish(): void {
    if (this.#primary) this.metrics.setEngineState(this.#state);
    if (this.#modelId !== undefined) this.metrics.setModelState(this.#modelId, this.#state);
  }

  /** Reads the backend once more and stops listening to it (after the drain). */
  stop(): void {
    this.#unsubscribe();
    this.#update(this.backend.state);
  }

  /** Why a request cannot be served now, or undefined when it can. */
  notServing(): RfdetrError | undefined {
    if (this.#draining) return drainingError('(draining) and accepts no new requests');
    switch (this.#state) {
      case 'ready':
        return undefined;
      case 'failed': {
        const why = this.backend.failureReason;
        return new RfdetrError('E_SIDECAR_FAILED', `the engine${this.#name !== undefined ? ` of model ${this.#name}` : ''} failed and is not restarting${why ? ` (${why})` : ' (see the server log)'}: the process should be restarted, or the model fixed and the models reloaded (SIGHUP)`);
      }
      case 'stopped':
        return new RfdetrError('E_CLOSED', `the engine is stopped: ${ERRORS.E_DRAINING.message}`);
      case 'restarting':
        return new RfdetrError('E_STARTING', 'the engine is restarting after a failure: retry in a few seconds');
      case 'unresponsive':
        return new RfdetrError('E_STARTING', `the engine is not answering its liveness pings${this.backend.failureReason ? ` (${this.backend.failureReason})` : ''}: retry in a few seconds`);
      default:
        return new RfdetrError('E_STARTING', 'the model is starting (loading weights and warming up): retry in a few seconds; GET /ready answers 200 once it can serve');
    }
  }

  /** Per-device series: counters moved by what changed since the last look. */
  #updateDevices(): void {
    for (const d of this.backend.devices?.() ?? []) {
      const seen = this.#deviceSeen.get(d.device) ?? { restarts: 0, forwards: 0, forwardSeconds: 0, removed: false };
      const device = d.device;
      if (d.restarts > seen.restarts) this.metrics.deviceRestarts.inc({ device }, d.restarts - seen.restarts);
      if (d.forwards > seen.forwards) this.metrics.deviceForwards.inc({ device }, d.forwards - seen.forwards);
      if (d.forwardSeconds > seen.forwardSeconds) this.metrics.deviceForwardSeconds.inc({ device }, d.forwardSeconds - seen.forwardSeconds);
      if (d.removed && !seen.removed) this.metrics.devicesRemoved.inc();
      this.metrics.deviceInFlight.set({ device }, d.inFlight);
      this.metrics.setDeviceState(device, d.state);
      this.#deviceSeen.set(device, { restarts: d.restarts, forwards: d.forwards, forwardSeconds: d.forwardSeconds, removed: d.removed });
    }
  }

  #update(next: BackendState): void {
    this.#updateDevices();
    const restarts = this.backend.restarts;
    if (restarts > this.#restartsSeen) this.metrics.sidecarRestarts.inc(restarts - this.#restartsSeen);
    this.#restartsSeen = restarts;
    if (next === this.#state) return;
    this.#state = next;
    this.#publish();
    for (const fn of this.#listeners) fn();
  }
}
