// The domain-level seam between everything above the sidecar (HTTP, CLI, detect) and the sidecar
// client/supervisor that implements it. No wire (snake_case) shapes cross this file.

import type { EncodedImage, RgbImage } from '../image/decode.ts';
import type { FrameData, Prepared, TransportBudget } from './transport.ts';

export type { EncodedImage };

/**
 * One head output as the sidecar's hello declares it: the infer reply carries it by `name`, product(shape) f32
 * values; with `rows: 'selected'` only the rows (along axis 0, shape[0] their bound) of the queries the request's
 * `select` picked, K·product(shape[1:]) values, their queries in InferResult.rows (PROTOCOL.md, "Selected rows").
 */
export interface OutputSpec {
  name: string;
  dtype: 'f32';
  shape: number[];
  rows?: 'selected';
}

/**
 * Which rows a selected output carries (the sidecar's rule, PROTOCOL.md "Selected rows"): queries whose best
 * class passes `threshold` (or its class's entry of `classThresholds`) and is among `classes` (all when
 * absent), the best `max` by logit and their near-ties. A superset of what the detect postprocess keeps with
 * the same parameters.
 */
export interface RowSelect {
  /** 0..1, on sigmoid(logit). */
  threshold: number;
  /** Rows before near-ties; 0 = none. */
  max: number;
  /** Class indices a row's label must be among; absent = every class. */
  classes?: readonly number[];
  /** Class index → its threshold (0..1) instead of `threshold`. */
  classThresholds?: ReadonlyMap<number, number>;
}

export type BackendState = 'starting' | 'ready' | 'unresponsive' | 'restarting' | 'failed' | 'stopped';

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
  /**
   * The variant the sidecar loaded ("base", "nano", "small", "medium", "large", "large_deprecated", "seg-nano", …: the names
   * of checkpointVariant); null from a version-2 sidecar, whose hello does not say.
   */
  variant: string | null;
  /** The model's task ("detect", "segment"); a version-2/3 sidecar's is "detect". */
  task: string;
  /** The head outputs every infer result carries, in the sidecar's order. */
  outputs: OutputSpec[];
  /** The arithmetic the engine runs ("fp32", "bf16", "int8"); null from a version-2/3 sidecar, which does not say. */
  precision: string | null;
  /** The precisions the engine can run, its default first; null from a version-2/3 sidecar. */
  precisions: string[] | null;
  /** Whether the engine's forward computes on the host's cores; null from a version-2/3 sidecar. */
  hostCores: boolean | null;
  /** What the spawned sidecar did with `--nice` (its READY line); absent for an external one. */
  enginePriority?: EnginePriority;
}

/**
 * `serve --engine-nice`'s default: the spawned sidecar asks for nice -10 (every thread; the server's session, so its autogroup, is left alone), applied only
 * where the host permits it (bench/README.md, "Engine priority", has the numbers that chose it).
 */
export const DEFAULT_ENGINE_NICE = -10;

/** The sidecar's `--nice` outcome (PROTOCOL.md, the READY line). */
export interface EnginePriority {
  /** The nice value asked for (-20..0; 0 = leave as started). */
  requested: number;
  /** The process's nice value after the attempt. */
  nice: number;
  /** Every thread got `requested`. */
  applied: boolean;
  /** Its session's autogroup: "applied", "off", "not a session leader", "not requested", or why it failed. */
  autogroup: string;
  /** Why it was not applied. */
  note?: string;
}

export interface InferOptions {
  /** Abort while queued or in flight (e.g. the HTTP client went away). */
  signal?: AbortSignal;
  /** Per-request deadline in ms, from the moment infer() is called. */
  deadlineMs?: number;
  /**
   * The rows a selected output carries (a `segment` model's mask logits); sent only to a sidecar whose hello
   * declares a selected output. Without it such an output comes back with 0 rows.
   */
  select?: RowSelect;
}

/**
 * What a forward starts from: a decoded image (RGB u8, HWC; the sidecar resizes and normalises it), an image
 * file the sidecar decodes first (it may decline: E_SIDECAR_DECLINED, then decode it and send `image`) or
 * pixel_values f32 [3,S,S] CHW already prepared (fixtures, `verify`).
 */
export type InferInput = { image: RgbImage } | { encoded: EncodedImage } | { pixelValues: Float32Array };

export interface InferResult {
  /**
   * The head outputs by name, exactly those SidecarInfo.outputs declares, each of its size (detect: `logits`
   * f32 [numQueries × numClasses] pre-sigmoid, `pred_boxes` f32 [numQueries × 4] normalised cxcywh, unclamped).
   */
  outputs: Record<string, Float32Array>;
  /**
   * Per selected output (OutputSpec.rows), the query of each of its rows in row order: outputs[name] holds
   * rows[name].length rows. Present exactly when the hello declares a selected output.
   */
  rows?: Record<string, Uint32Array>;
  /** The sidecar's decode time of the file: present for `encoded` input only. */
  decodeMs?: number;
  /** The sidecar's resize + normalise time (0 for pixelValues input). */
  preprocessMs: number;
  /** The engine's own forward time, measured in the sidecar. */
  forwardMs: number;
  /** Round trip minus decodeMs, preprocessMs and forwardMs: framing, socket transfer, frame decode and waiting in the sidecar. */
  transferMs: number;
  /** performance.now() when the whole request frame had been handed to the kernel (for the request timeline). */
  frameWrittenAt?: number;
  /** performance.now() when the reply frame had been read. */
  replyReadAt?: number;
}

/** One sidecar of a pool as /health, /info and the metrics show it. */
export interface DeviceStatus {
  /** The card index (`--devices`) or worker label (`worker-N`). */
  device: string;
  state: BackendState;
  /** (Re)starts after the first. */
  restarts: number;
  /** The last death or the final error, in the sidecar's own words where it said any; null while it serves. */
  lastFailure: string | null;
  /** Taken out of the pool (its restart cap was reached, or it cannot start): it gets no more requests. */
  removed: boolean;
  /** Requests handed to it and not yet settled. */
  inFlight: number;
  /** Forwards it answered, and the sum of their forward times (s). */
  forwards: number;
  forwardSeconds: number;
  /** Its current process id (spawn mode). */
  pid: number | undefined;
}

/** An inference backend: one supervised (or external) sidecar, forwards served one at a time; its lifecycle can be watched. */
export interface InferenceBackend {
  readonly state: BackendState;
  /** The current sidecar's hello; null until the first READY. */
  readonly info: SidecarInfo | null;
  /** Sidecar (re)starts after the first one (spawn mode) or reconnects (external mode) so far. */
  readonly restarts: number;
  /**
   * Why the backend is not serving, in the sidecar's own words where it said any: the last death while
   * `restarting`, the final error when `failed` or destroyed. Null while `starting` the first time, `ready`,
   * or after a clean close().
   */
  readonly failureReason: string | null;
  /** Each sidecar behind this backend (a pool); absent for a single sidecar outside a pool. */
  devices?(): DeviceStatus[];
  /** Calls `listener(state, previous)` on every state transition; returns the function that unsubscribes it. */
  onStateChange(listener: (state: BackendState, prev: BackendState) => void): () => void;
  infer(input: InferInput, opts?: InferOptions): Promise<InferResult>;
  /**
   * The transport (transport.ts prepareFrame): how `frame` reaches this backend's sidecar (a file sent for it to
   * decode or decoded here, pixels through shared memory or the socket, a tensor as it is), within `budget`.
   */
  prepare(frame: FrameData, budget?: TransportBudget): Promise<Prepared>;
  /** Finish in-flight work, then stop the sidecar. */
  close(): Promise<void>;
  /** Reject everything at once and kill the sidecar. */
  destroy(err?: Error): void;
}
