// One image through the whole detector in process: bytes → decode → preprocess → backend.infer → postprocess →
// the POST /predict response object (seed 000 §3). `buildPredictResponse` is the one place that response shape
// is written; the CLI's in-process path and anything else answering like /predict use it.
//
// Class filtering (`classes`) is applied before the max-detections cap, so `--classes cat --max-detections 2`
// gives the two best cats, not the cats among the two best detections.
import { decodeImage, type RgbImage } from '../image/decode.ts';
import { preprocess } from '../image/preprocess.ts';
import type { InferenceBackend, InferOptions } from '../sidecar/backend.ts';
import { postprocess, rawToNested, type Detection } from './postprocess.ts';

export const INPUT_SIZE: [number, number] = [560, 560];
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

/** One detection as /predict returns it (the domain Detection without its query slot). */
export type PredictDetection = Omit<Detection, 'query'>;

export interface PredictResponse {
  detections: PredictDetection[];
  num_detections: number;
  image_size: { width: number; height: number };
  input_size: [number, number];
  threshold: number;
  timing_ms: PredictTiming;
  raw?: { logits: number[][]; pred_boxes: number[][] };
}

export interface BuildResponseArgs {
  detections: readonly Detection[] | readonly PredictDetection[];
  width: number;
  height: number;
  threshold: number;
  timing: PredictTiming;
  raw?: { logits: number[][]; pred_boxes: number[][] } | undefined;
}

/** The /predict response object, keys in the contract's order. */
export function buildPredictResponse(a: BuildResponseArgs): PredictResponse {
  const body: PredictResponse = {
    detections: a.detections.map((d) => ({ label: d.label, label_id: d.label_id, score: d.score, box: d.box, box_cxcywh_norm: d.box_cxcywh_norm })),
    num_detections: a.detections.length,
    image_size: { width: a.width, height: a.height },
    input_size: INPUT_SIZE,
    threshold: a.threshold,
    timing_ms: {
      decode: a.timing.decode, preprocess: a.timing.preprocess, inference: a.timing.inference, postprocess: a.timing.postprocess,
      total: a.timing.total, queue: a.timing.queue, transfer: a.timing.transfer,
    },
  };
  if (a.raw) body.raw = a.raw;
  return body;
}

export interface DetectParams {
  /** Keep score > threshold (0..1). */
  threshold: number;
  /** At most this many detections, after class filtering. */
  maxDetections: number;
  /** Include raw logits/pred_boxes as nested arrays (the `return_raw` layout). */
  returnRaw?: boolean;
  /** Keep only these class indices; undefined keeps all. */
  classes?: ReadonlySet<number> | undefined;
}

export interface DetectOptions extends InferOptions {
  /** Labels by class index when the backend's hello carries none. */
  labels?: readonly string[];
}

export interface DetectResult {
  response: PredictResponse;
  /** The decoded image (RGB u8 at the original size), e.g. to draw the detections on. */
  image: RgbImage;
  /** The detections with their query slots (the response carries the same list without them). */
  detections: Detection[];
}

/** Keeps the detections whose class is in `classes` (all when undefined), then the first `maxDetections`. */
export function selectDetections<T extends { label_id: number }>(detections: readonly T[], classes: ReadonlySet<number> | undefined, maxDetections: number): T[] {
  const kept = classes ? detections.filter((d) => classes.has(d.label_id)) : detections.slice();
  if (kept.length > maxDetections) kept.length = maxDetections;
  return kept;
}

/** Decodes, preprocesses, runs one forward on `backend` and postprocesses one image. */
export async function detectImage(backend: InferenceBackend, bytes: Uint8Array, params: DetectParams, opts: DetectOptions = {}): Promise<DetectResult> {
  const t0 = performance.now();
  const image = await decodeImage(bytes);
  const t1 = performance.now();
  const pixels = preprocess(image);
  const t2 = performance.now();
  const out = await backend.infer({ pixelValues: pixels }, { signal: opts.signal, deadlineMs: opts.deadlineMs });
  const t3 = performance.now();
  const info = backend.info;
  const numQueries = info?.numQueries ?? DEFAULT_NUM_QUERIES;
  const numClasses = info?.numClasses ?? DEFAULT_NUM_CLASSES;
  const labels = info?.labels?.length ? info.labels : opts.labels ?? [];
  const raw = { logits: out.logits, predBoxes: out.predBoxes, numQueries, numClasses };
  const all = postprocess(raw, {
    width: image.width, height: image.height, threshold: params.threshold, labels,
    maxDetections: params.classes ? numQueries : params.maxDetections,
  });
  const detections = selectDetections(all, params.classes, params.maxDetections);
  const nested = params.returnRaw ? rawToNested(out.logits, out.predBoxes, numQueries, numClasses) : undefined;
  const t4 = performance.now();
  const timing: PredictTiming = {
    decode: t1 - t0,
    preprocess: t2 - t1,
    inference: out.forwardMs,
    postprocess: t4 - t3,
    total: t4 - t0,
    queue: Math.max(0, t3 - t2 - out.forwardMs - out.transferMs),
    transfer: out.transferMs,
  };
  const response = buildPredictResponse({ detections, width: image.width, height: image.height, threshold: params.threshold, timing, raw: nested });
  return { response, image, detections };
}
