// The backend's lifecycle as the HTTP server sees it: a cached copy of its state (probes read this and never
// touch the backend), updated from the backend's own state-change events; restarts counted into the metrics;
// each transition logged once; and the one answer to "may a request be served now, and if not, why".
import { drainingError, ERRORS, RfdetrError } from '../errors.ts';
import type { BackendState, InferenceBackend } from '../sidecar/backend.ts';
import type { Logger } from './log.ts';
import type { ServerMetrics } from './metrics.ts';

export class EngineState {
  #state: BackendState;
  #restartsSeen: number;
  #draining = false;
  readonly #unsubscribe: () => void;
  readonly #listeners = new Set<() => void>();

  constructor(
    private readonly backend: InferenceBackend,
    private readonly metrics: ServerMetrics,
    private readonly logger: Logger,
  ) {
    this.#state = backend.state;
    this.#restartsSeen = backend.restarts;
    metrics.setEngineState(this.#state);
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
        return new RfdetrError('E_SIDECAR_FAILED', `the engine failed and is not restarting${why ? ` (${why})` : ' (see the server log)'}: the process should be restarted`);
      }
      case 'stopped':
        return new RfdetrError('E_CLOSED', `the engine is stopped: ${ERRORS.E_DRAINING.message}`);
      case 'restarting':
        return new RfdetrError('E_STARTING', 'the engine is restarting after a failure: retry in a few seconds');
      default:
        return new RfdetrError('E_STARTING', 'the model is starting (loading weights and warming up): retry in a few seconds; GET /ready answers 200 once it can serve');
    }
  }

  #update(next: BackendState): void {
    const restarts = this.backend.restarts;
    if (restarts > this.#restartsSeen) this.metrics.sidecarRestarts.inc(restarts - this.#restartsSeen);
    this.#restartsSeen = restarts;
    if (next === this.#state) return;
    const prev = this.#state;
    this.logger.log(next === 'failed' ? 'error' : 'info', `engine state: ${prev} -> ${next}`, { event: 'engine_state', from: prev, to: next });
    this.#state = next;
    this.metrics.setEngineState(next);
    for (const fn of this.#listeners) fn();
  }
}
