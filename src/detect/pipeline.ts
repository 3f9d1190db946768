// One image's forward and postprocess: what the backend's transport sends (decoded pixels, or a file the sidecar
// decodes; src/sidecar/transport.ts) → the sidecar's infer (resize, normalise and forward in C++) → the task's
// postprocess (tasks.ts) → the POST /predict response object (SERVING.md, "Response (200)"). The CLI's and the
// HTTP server's detectors both run `detectDecoded`; `buildPredictResponse` is the one place that shape is written.
//
// Class filtering (`classes`) is applied before the max-detections cap, so `--classes cat --max-detections 2`
// gives the two best cats, not the cats among the two best detections. For a task with a selected output (a
// segment model's mask logits) the same parameters, sent as the request's `select`, tell the sidecar which
// queries' rows to compute and send, and each kept detection gets its row.
import type { RgbImage } from '../image/decode.ts';
import type { EncodedImage, InferInput, InferOptions, InferResult, RowSelect, SidecarInfo } from '../sidecar/backend.ts';
import { RfdetrError } from '../errors.ts';
import { detectionMasks } from './masks/detections.ts';
import type { Mask } from './masks/encode.ts';
import type { Detection } from './postprocess.ts';
import { selectedOutputOf, taskFor } from './tasks.ts';
import type { PredictParams } from './params-schema.ts';

/** RF-DETR-base's input side, used only when no engine has said its own (a backend before its first hello). */
export const DEFAULT_INPUT_SIDE = 560;
const DEFAULT_NUM_QUERIES = 300;
const DEFAULT_NUM_CLASSES = 91;

/** Per-stage milliseconds, never rounded. `queue`: time spent waiting beyond transfer + forward. */
export interface PredictTiming {
  decode: number;
  preprocess: number;
  inference: number;
  postprocess: number;
  total: number;
  queue: number;
  transfer: number;
}

/** One detection as /predict returns it (the domain Detection without its query slot; a segmentation model's `mask`). */
export type PredictDetection = Omit<Detection, 'query'> & { mask?: Mask };

export interface PredictResponse {
  detections: PredictDetection[];
  num_detections: number;
  image_size: { width: number; height: number };
  /** The model's input [height, width] (560×560 for RF-DETR-base). */
  input_size: [number, number];
  threshold: number;
  timing_ms: PredictTiming;
  /** `return_raw`: each head output as nested arrays under its name (detect: logits [Q][C], pred_boxes [Q][4]). */
  raw?: Record<string, number[][]>;
  /** The picture with the detections drawn on it (HTTP `return_image`). */
  annotated_image?: { format: 'png' | 'jpeg'; media_type: 'image/png' | 'image/jpeg'; base64: string };
}

export interface BuildResponseArgs {
  detections: readonly Detection[] | readonly PredictDetection[];
  /** Each detection's `mask` (a segmentation model, mask_format other than none), in the order of `detections`. */
  masks?: readonly Mask[] | undefined;
  width: number;
  height: number;
  inputSize: [number, number];
  threshold: number;
  timing: PredictTiming;
  raw?: Record<string, number[][]> | undefined;
}

/** The /predict response object, keys in the contract's order. */
export function buildPredictResponse(a: BuildResponseArgs): PredictResponse {
  const body: PredictResponse = {
    detections: a.detections.map((d, i) => {
      const out: PredictDetection = { label: d.label, label_id: d.label_id, score: d.score, box: d.box, box_cxcywh_norm: d.box_cxcywh_norm };
      const mask = a.masks?.[i];
      if (mask) out.mask = mask;
      return out;
    }),
    num_detections: a.detections.length,
    image_size: { width: a.width, height: a.height },
    input_size: a.inputSize,
    threshold: a.threshold,
    timing_ms: {
      decode: a.timing.decode, preprocess: a.timing.preprocess, inference: a.timing.inference, postprocess: a.timing.postprocess,
      total: a.timing.total, queue: a.timing.queue, transfer: a.timing.transfer,
    },
  };
  if (a.raw) body.raw = a.raw;
  return body;
}

/**
 * What the detector needs of the /predict parameters: the request's own fields, with `classes` and
 * `class_thresholds` resolved to class indices of the model (undefined: all classes, the one threshold); both
 * apply before the `max_detections` cap.
 */
export type DetectParams = Pick<PredictParams, 'threshold' | 'max_detections'> & Partial<Pick<PredictParams, 'return_raw' | 'mask_format'>> & {
  classes?: ReadonlySet<number> | undefined;
  /** `class_thresholds` by class index: a detection of such a class is kept when its score > this instead. */
  classThresholds?: ReadonlyMap<number, number> | undefined;
  /**
   * A segment model: false asks for no mask logits (no `select` is sent, no detection gets `maskLogits`);
   * default true. Ignored for a model without masks.
   */
  masks?: boolean | undefined;
};

/** Whether these parameters ask a segment model for masks: not with `masks: false` nor `mask_format: none`. */
export function wantsMasks(params: Pick<DetectParams, 'masks' | 'mask_format'>): boolean {
  return params.masks !== false && params.mask_format !== 'none';
}

/** A kept detection of a segment model: its query's mask logits, a view of M×M f32 (row-major, M = DetectResult.maskSide). */
export type MaskedDetection = Detection & { maskLogits?: Float32Array };

export interface DetectOptions extends InferOptions {
  /** Labels by class index when the backend's hello carries none. */
  labels?: readonly string[];
}

/** One forward as the detector sees it: the backend's infer, or the HTTP server's engine queue in front of it. */
export type Forward = (input: InferInput, opts: InferOptions) => Promise<InferResult & { queueMs?: number }>;

/** An image the sidecar decodes (the file's bytes), not decoded pixels. */
export function isEncoded(image: RgbImage | EncodedImage): image is EncodedImage {
  return 'bytes' in image;
}

export interface DecodedRun extends DetectOptions {
  /** When the request started (performance.now()): `total` is measured from here. */
  t0: number;
  /** Time the decode took (an encoded image: reading its header; the sidecar's decode is added to it). */
  decodeMs: number;
  /** Time spent waiting before the forward was asked for (e.g. for a decode slot); reported in `queue`. */
  waitMs?: number;
}

export interface DetectResult<I extends RgbImage | EncodedImage = RgbImage> {
  response: PredictResponse;
  /** The decoded image (RGB u8 at the original size), e.g. to draw the detections on; or the file the sidecar decoded. */
  image: I;
  /**
   * The detections with their query slots (the response carries the same list without them); for a segment
   * model asked for masks, each with its `maskLogits`.
   */
  detections: MaskedDetection[];
  /** A segment model asked for masks: M, the side of each detection's M×M mask logits. */
  maskSide?: number;
}

/** Keeps the detections whose class is in `classes` (all when undefined), then the first `maxDetections`. */
export function selectDetections<T extends { label_id: number }>(detections: readonly T[], classes: ReadonlySet<number> | undefined, maxDetections: number): T[] {
  const kept = classes ? detections.filter((d) => classes.has(d.label_id)) : detections.slice();
  if (kept.length > maxDetections) kept.length = maxDetections;
  return kept;
}

/** [height, width] of the model input, from the engine's hello. */
export function inputSizeOf(info: SidecarInfo | null): [number, number] {
  return info ? [info.inputShape[1], info.inputShape[2]] : [DEFAULT_INPUT_SIDE, DEFAULT_INPUT_SIDE];
}

/**
 * Runs one forward on a decoded image, or on a file the sidecar decodes (`isEncoded`), and postprocesses it into
 * the /predict response.
 */
export async function detectDecoded<I extends RgbImage | EncodedImage>(forward: Forward, info: SidecarInfo | null, image: I, params: DetectParams, run: DecodedRun): Promise<DetectResult<I>> {
  const numQueries = info?.numQueries ?? DEFAULT_NUM_QUERIES;
  const numClasses = info?.numClasses ?? DEFAULT_NUM_CLASSES;
  const task = taskFor(info?.task ?? 'detect');
  const dims = { numQueries, numClasses, inputShape: info?.inputShape };
  const perClass = params.classThresholds?.size ? params.classThresholds : undefined;
  const masks = wantsMasks(params) ? selectedOutputOf(task, dims) : undefined;
  const select = masks ? rowSelectOf(params, perClass) : undefined;
  const t1 = performance.now();
  const out = await forward(isEncoded(image) ? { encoded: image } : { image }, { signal: run.signal, deadlineMs: run.deadlineMs, ...(select ? { select } : {}) });
  const t2 = performance.now();
  const labels = info?.labels?.length ? info.labels : run.labels ?? [];
  // Boxes refer to the stored image, also when the pixels sent were a scaled-down decode.
  const size = ('source' in image ? image.source : undefined) ?? image;
  // With per-class thresholds the post-process keeps everything above the lowest of them; each detection is
  // then held to its own class's threshold (the global one for the others).
  const floor = perClass ? Math.min(params.threshold, ...perClass.values()) : params.threshold;
  const all = task.postprocess(out.outputs, dims, {
    width: size.width, height: size.height, threshold: floor, labels,
    maxDetections: params.classes || perClass ? numQueries : params.max_detections,
  });
  const passing = perClass ? all.filter((d) => d.score > Math.fround(perClass.get(d.label_id) ?? params.threshold)) : all;
  const detections: MaskedDetection[] = selectDetections(passing, params.classes, params.max_detections);
  if (masks) attachMaskRows(detections, masks.name, out);
  const nested = params.return_raw ? task.raw(out.outputs, dims) : undefined;
  // After the class filter and the cap: only the kept detections' masks are made, one at a time.
  const maskValues = masks ? await detectionMasks(detections, size.width, size.height, params.mask_format ?? 'rle') : undefined;
  const t3 = performance.now();
  // Waiting: before the forward was asked for, in a queue in front of the backend, and anything of the round
  // trip the sidecar did not account for (its own queue behind another client's forward).
  const unaccounted = t2 - t1 - (out.queueMs ?? 0) - (out.decodeMs ?? 0) - out.preprocessMs - out.forwardMs - out.transferMs;
  const timing: PredictTiming = {
    // An encoded image: the header read here and the sidecar's own decode.
    decode: run.decodeMs + (out.decodeMs ?? 0),
    preprocess: out.preprocessMs,
    inference: out.forwardMs,
    postprocess: t3 - t2,
    total: t3 - run.t0,
    queue: (run.waitMs ?? 0) + (out.queueMs ?? 0) + Math.max(0, unaccounted),
    transfer: out.transferMs,
  };
  const response = buildPredictResponse({
    detections, masks: maskValues, width: size.width, height: size.height, inputSize: inputSizeOf(info), threshold: params.threshold, timing, raw: nested,
  });
  return { response, image, detections, ...(masks ? { maskSide: masks.shape[1]! } : {}) };
}

/** The sidecar's row selection for these parameters: a superset of the detections the postprocess keeps. */
function rowSelectOf(params: DetectParams, perClass: ReadonlyMap<number, number> | undefined): RowSelect {
  return {
    threshold: params.threshold,
    max: params.max_detections,
    ...(params.classes ? { classes: [...params.classes] } : {}),
    ...(perClass ? { classThresholds: perClass } : {}),
  };
}

/**
 * Gives each kept detection its query's row of the selected output `name` (a view, not a copy). The sidecar
 * selects a superset of what the postprocess keeps, so a kept detection without a row is a broken contract:
 * an error naming the query, never a detection silently without its mask.
 */
function attachMaskRows(detections: MaskedDetection[], name: string, out: InferResult): void {
  const rows = out.rows?.[name];
  const values = out.outputs[name];
  if (!rows || !values) {
    if (detections.length === 0) return;
    throw new RfdetrError('E_INTERNAL', `the forward returned no '${name}' rows for the ${detections.length} detection(s) kept; the sidecar must send the rows its select picks (PROTOCOL.md, "Selected rows")`);
  }
  const rowOf = new Map<number, number>();
  rows.forEach((q, r) => rowOf.set(q, r));
  const size = rows.length ? values.length / rows.length : 0;
  for (const d of detections) {
    const r = rowOf.get(d.query);
    if (r === undefined) {
      throw new RfdetrError('E_INTERNAL',
        `detection of query ${d.query} (${d.label}, score ${d.score}) was kept but the sidecar sent no '${name}' row for it (rows for queries ${Array.from(rows).join(', ') || 'none'}); ` +
        'its selection must keep every query the postprocess keeps (PROTOCOL.md, "Selected rows")');
    }
    d.maskLogits = values.subarray(r * size, (r + 1) * size);
  }
}
