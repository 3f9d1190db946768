// The domain-level seam between everything above the sidecar (HTTP, CLI, detect) and the sidecar
// client/supervisor that implements it. No wire (snake_case) shapes cross this file.

export type BackendState = 'starting' | 'ready' | 'restarting' | 'failed' | 'stopped';

/** What the sidecar said about itself in its `hello`. */
export interface SidecarInfo {
  protocolVersion: number;
  sidecarVersion: string;
  engine: string;
  device: string;
  inputShape: [number, number, number];
  numQueries: number;
  numClasses: number;
  /** Label per class index (COCO-91 ids for the published model); "N/A" for unused ids. */
  labels: string[];
}

export interface InferOptions {
  /** Abort while queued or in flight (e.g. the HTTP client went away). */
  signal?: AbortSignal;
  /** Per-request deadline in ms, from the moment infer() is called. */
  deadlineMs?: number;
}

export interface InferResult {
  /** f32 [numQueries × numClasses], pre-sigmoid. */
  logits: Float32Array;
  /** f32 [numQueries × 4], normalised cxcywh, unclamped. */
  predBoxes: Float32Array;
  /** The engine's own forward time, measured in the sidecar. */
  forwardMs: number;
  /** Round trip minus forwardMs: framing, socket transfer and decode. */
  transferMs: number;
}

/** An inference backend: one supervised (or external) sidecar, forwards served one at a time. */
export interface InferenceBackend {
  readonly state: BackendState;
  /** The current sidecar's hello; null until the first READY. */
  readonly info: SidecarInfo | null;
  infer(pixelValues: Float32Array, opts?: InferOptions): Promise<InferResult>;
  /** Finish in-flight work, then stop the sidecar. */
  close(): Promise<void>;
  /** Reject everything at once and kill the sidecar. */
  destroy(err?: Error): void;
}

/**
 * A backend whose lifecycle can be watched (the supervisor, spawned or external): what /ready, /health, /info
 * and the metrics report, and what `serve` waits on. A separate interface so that backends that only infer
 * (test and bench stand-ins) need not implement it.
 */
export interface SupervisedBackend extends InferenceBackend {
  /** Sidecar (re)starts after the first one (spawn mode) or reconnects (external mode) so far. */
  readonly restarts: number;
  /**
   * Why the backend is not serving, in the sidecar's own words where it said any: the last death while
   * `restarting`, the final error when `failed` or destroyed. Null while `starting` the first time, `ready`,
   * or after a clean close().
   */
  readonly failureReason: string | null;
  /** Calls `listener(state, previous)` on every state transition; returns the function that unsubscribes it. */
  onStateChange(listener: (state: BackendState, prev: BackendState) => void): () => void;
}
