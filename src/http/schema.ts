// The one schema of the HTTP surface (TypeBox: each schema is a plain JSON Schema object). The same objects are
// compiled by ajv to validate /predict requests and are the components of /openapi.json, so the document and
// the validator cannot disagree. `x-expected` is the "Expected … for FIELD" text of the 422 a field gets
// (`x-expected-text` where multipart and query strings word it otherwise); error codes are an enum of the one
// error table (src/errors.ts). The /predict parameters are declared in src/detect/params-schema.ts.
import { Type, type TSchema } from '@sinclair/typebox';
import { ERRORS } from '../errors.ts';
import { MAX_IMAGE_URL_LENGTH } from '../image/limits.ts';
import { expected, PredictParamsProps } from '../detect/params-schema.ts';

export { DEFAULT_MAX_DETECTIONS, DEFAULT_THRESHOLD, MAX_DETECTIONS_LIMIT, PredictParamsProps, type PredictParams } from '../detect/params-schema.ts';

/** Images in one `images: [...]` request: one client's share of the default queue (32), so one batch fits beside another client's. */
export const MAX_BATCH_IMAGES = 16;

export const ImageField = Type.String({
  description: 'base64 PNG or JPEG bytes; a data:image/...;base64, prefix and line-wrapped base64 are accepted',
  ...expected('a base64 string (PNG or JPEG bytes, optionally a data: URL)'),
});

// Unknown fields are refused (422 naming the field): a misspelt `max_detection` would otherwise be ignored
// and the request served with the default, which the client cannot tell from its own choice.
const closed = { additionalProperties: false } as const;

export const PredictRequest = Type.Object({ image: ImageField, ...PredictParamsProps }, { ...closed, description: 'one image (the reference app\'s form)' });

export const PredictUrlRequest = Type.Object({
  image_url: Type.String({
    maxLength: MAX_IMAGE_URL_LENGTH,
    description: `an http(s) URL of a PNG, JPEG, WebP, GIF or TIFF image (at most ${MAX_IMAGE_URL_LENGTH} characters), fetched by the server: only when it was started with --allow-url-host for that host (off by default); same host redirects only, size and time capped`,
    ...expected(`an http:// or https:// URL string of at most ${MAX_IMAGE_URL_LENGTH} characters`),
  }),
  ...PredictParamsProps,
}, { ...closed, description: 'one image by URL' });

export const BatchPredictRequest = Type.Object({
  images: Type.Array(ImageField, {
    minItems: 1, maxItems: MAX_BATCH_IMAGES,
    description: `several images, answered in order as results[]; at most ${MAX_BATCH_IMAGES}, and at most 32 MiB of image bytes in all. The other fields apply to every image`,
    ...expected(`a non-empty array of at most ${MAX_BATCH_IMAGES} base64 strings (PNG or JPEG bytes)`),
  }),
  ...PredictParamsProps,
}, { ...closed, description: 'several images in one request' });

/** The params alone: multipart fields and query strings (the image arrives as a file part or the body). */
export const PredictParamsOnly = Type.Object(PredictParamsProps, closed);

const four = (description: string) => Type.Array(Type.Number(), { minItems: 4, maxItems: 4, description });

export const Detection = Type.Object({
  label: Type.String({ description: 'name from config.json id2label ("N/A" for unused ids)' }),
  label_id: Type.Integer({ minimum: 0, description: 'class index (COCO-91 for RF-DETR-base)' }),
  score: Type.Number({ description: 'max over classes of sigmoid(logit)' }),
  box: four('[x1, y1, x2, y2] in original-image pixels, clamped to the image'),
  box_cxcywh_norm: four("the model's normalised [cx, cy, w, h], unclamped"),
  mask: Type.Optional(Type.Union([
    Type.Object({
      size: Type.Array(Type.Integer({ minimum: 1 }), { minItems: 2, maxItems: 2, description: '[height, width] of the image' }),
      counts: Type.String({ description: "pycocotools' compressed counts: column-major runs starting with a run of 0s" }),
    }, { description: 'mask_format rle (the default): COCO RLE, as pycocotools.mask.encode gives it (pycocotools.mask.decode reads it)' }),
    Type.Array(Type.Array(Type.Number(), { minItems: 8 }), { description: 'mask_format polygon: COCO polygons, the outer contours (holes are inside them), each [x1, y1, x2, y2, ...] in image pixel-corner coordinates' }),
  ], { description: "segmentation models only (absent with mask_format none and on detection models): the detection's mask at the image size, upstream's bilinear upsample of the mask logits > 0 over the whole image" })),
});

const ms = (description: string) => Type.Number({ description });

export const Timing = Type.Object({
  decode: ms('image bytes to RGB'),
  preprocess: ms('resize to 560x560 and normalise (measured in the sidecar)'),
  inference: ms('the engine forward, as the sidecar measured it'),
  postprocess: ms('scores, threshold, sort, boxes'),
  total: ms('arrival of the request to the response being built (includes the body upload)'),
  queue: ms('waiting for a decode slot, the pixel budget and the engine'),
  transfer: ms('the sidecar round trip minus preprocess and forward'),
}, { description: 'milliseconds, not rounded' });

const nested = (description: string) => Type.Array(Type.Array(Type.Number()), { description });

export const PredictResponse = Type.Object({
  detections: Type.Array(Detection, { description: 'sorted by score descending' }),
  num_detections: Type.Integer({ minimum: 0 }),
  image_size: Type.Object({ width: Type.Integer({ minimum: 1 }), height: Type.Integer({ minimum: 1 }) }),
  input_size: Type.Array(Type.Integer(), { minItems: 2, maxItems: 2, description: '[height, width] of the model input: [560, 560]' }),
  threshold: Type.Number(),
  timing_ms: Timing,
  raw: Type.Optional(Type.Object({
    logits: nested('[300][91] pre-sigmoid'),
    pred_boxes: nested('[300][4] normalised cxcywh'),
  }, { description: 'only with return_raw' })),
  annotated_image: Type.Optional(Type.Object({
    format: Type.Union([Type.Literal('png'), Type.Literal('jpeg')]),
    media_type: Type.Union([Type.Literal('image/png'), Type.Literal('image/jpeg')]),
    base64: Type.String({ description: 'the encoded picture, original size, detections drawn' }),
  }, { description: 'only with return_image' })),
});

export const ErrorCode = Type.Union(Object.keys(ERRORS).map((c) => Type.Literal(c)), { description: 'the error table of src/errors.ts; the status derives from it' });

export const ImageError = Type.Object({
  detail: Type.String({ description: 'what was wrong with this image' }),
  code: ErrorCode,
  status: Type.Integer({ description: 'the HTTP status a request with this image alone would have had' }),
}, { additionalProperties: true, description: 'one image of a batch that failed; the others are answered as usual' });

export const BatchPredictResponse = Type.Object({
  results: Type.Array(Type.Union([PredictResponse, ImageError]), { description: 'one per image, in the order sent: a PredictResponse, or an ImageError for that image only' }),
});

export const ErrorBody = Type.Object({
  detail: Type.String({ description: 'what was wrong, what was expected, what to do' }),
  code: ErrorCode,
  request_id: Type.String(),
  field: Type.Optional(Type.String({ description: 'for E_SCHEMA: the offending field' })),
  expected: Type.Optional(Type.String({ description: 'for E_SCHEMA: what the field accepts' })),
}, { additionalProperties: true, description: 'further fields name the limit involved (limit, max_bytes, queue_size, deadline_ms, …)' });

export const EngineStateName = Type.Union(['starting', 'ready', 'unresponsive', 'restarting', 'failed', 'stopped'].map((s) => Type.Literal(s)));

export const DeviceEntry = Type.Object({
  device: Type.String({ description: 'the card index (--devices) or worker-N (--workers)' }),
  state: EngineStateName,
  restarts: Type.Integer({ minimum: 0 }),
  last_failure: Type.Union([Type.String(), Type.Null()], { description: 'the last death or final error; null while it serves' }),
  removed: Type.Boolean({ description: 'taken out of the pool (restart cap reached or could not start); gets no requests' }),
  in_flight: Type.Integer({ minimum: 0 }),
}, { description: 'one sidecar of the pool' });

export const ModelStatus = Type.Object({
  id: Type.String({ description: 'the id a request names it by (`model`); the first model is the default' }),
  alias: Type.String({ description: 'the other name it answers to (its variant\'s lower-case name), or the id' }),
  name: Type.String({ description: 'the loaded variant: RF-DETR-base, RF-DETR-nano, …' }),
  task: Type.Union([Type.Literal('object-detection'), Type.Literal('instance-segmentation')]),
  input_size: Type.Array(Type.Integer(), { minItems: 2, maxItems: 2, description: 'the model input [height, width]' }),
  state: EngineStateName,
  failure: Type.Union([Type.String(), Type.Null()], { description: 'why it is not serving (a model that failed to start names its error here); null while it serves' }),
}, { description: 'one served model (serve --weights ID=DIR, --models FILE)' });

export const Health = Type.Object({
  status: Type.Union([Type.Literal('ok'), Type.Literal('starting')]),
  model: Type.String({ pattern: '^RF-DETR-', description: 'the loaded variant: RF-DETR-base, RF-DETR-nano, RF-DETR-small, …' }),
  device: Type.Union([Type.String(), Type.Null()]),
  devices: Type.Optional(Type.Array(DeviceEntry, { description: 'each sidecar (one per card or worker)' })),
  models: Type.Array(ModelStatus, { description: 'every served model; status is "ok" once --min-ready of them are ready' }),
});

export const Liveness = Type.Object({
  status: Type.Literal('alive'),
  model_ready: Type.Boolean(),
  engine_state: EngineStateName,
  draining: Type.Boolean(),
  model: Type.String(),
  uptime_s: Type.Number({ minimum: 0 }),
  queue_depth: Type.Integer({ minimum: 0 }),
  in_flight: Type.Integer({ minimum: 0 }),
});

export const Ready = Type.Object({}, { additionalProperties: false });

export const ModelList = Type.Object({
  object: Type.Literal('list'),
  data: Type.Array(Type.Object({
    id: Type.String(), object: Type.Literal('model'), owned_by: Type.String(),
    task: ModelStatus.properties.task, input_size: ModelStatus.properties.input_size, state: EngineStateName,
  })),
});

const nullable = <T extends TSchema>(t: T) => Type.Union([t, Type.Null()]);

export const Info = Type.Object({
  model: Type.String(),
  model_id: Type.String(),
  task: Type.Literal('object-detection'),
  state: EngineStateName,
  hardware: Type.Object({
    engine: nullable(Type.String()),
    device: nullable(Type.String()),
    host_cpu: nullable(Type.String()),
    host_cores: Type.Integer({ minimum: 1 }),
  }),
  weights: nullable(Type.Object({
    repo: Type.String(),
    revision: nullable(Type.String()),
    commit: Type.Optional(nullable(Type.String())),
    source: Type.Optional(Type.String({ description: 'hub, local, synth, …' })),
    synthetic: Type.Boolean({ description: 'a checkpoint made by `rfdetr weights synth`: its detections are meaningless' }),
    files: Type.Optional(Type.Union([Type.Array(Type.String()), Type.Record(Type.String(), Type.String())], { description: 'file names (no directories)' })),
    dir: Type.Optional(Type.String({ description: 'only at log level debug' })),
  })),
  sidecar: nullable(Type.Object({ version: Type.String(), protocol_version: Type.Integer() })),
  source: Type.Object({
    server: Type.String(),
    reference: Type.Object({ repo: Type.String(), commit: Type.String() }),
    tt_port: Type.Object({ repo: Type.String(), commit: Type.String() }),
  }),
  input: Type.Object({
    input_size: Type.Array(Type.Integer(), { minItems: 2, maxItems: 2 }),
    images_per_request: Type.Integer({ minimum: 1, description: 'the most images one request may carry (images: [...])' }),
    batch: Type.Integer({ description: 'the engine batch: images of one request run one after another' }),
    max_image_side: Type.Integer(),
    max_image_bytes: Type.Integer(),
    max_body_bytes: Type.Integer(),
    formats: Type.Array(Type.String()),
    num_queries: Type.Integer(),
    num_classes: Type.Integer(),
  }),
  serving: Type.Record(Type.String(), Type.Unknown(), { description: 'the serving limits in force (queue size, deadline, budgets)' }),
  labels: Type.Record(Type.String(), Type.String(), { description: 'class id → label' }),
  device_params: Type.Record(Type.String(), Type.Unknown()),
  devices: Type.Optional(Type.Array(DeviceEntry, { description: 'each sidecar (one per card or worker)' })),
  models: Type.Array(Type.Intersect([ModelStatus, Type.Object({
    engine: nullable(Type.String()), device: nullable(Type.String()),
    precision: nullable(Type.String({ description: 'the precision its engine runs, as its sidecar says' })),
    weights: Type.Unknown({ description: 'as the top-level weights, for this model' }),
    params: Type.Record(Type.String(), Type.Unknown(), { description: 'how it was started (engine, precision)' }),
  })]), { description: 'every served model; the top-level fields describe the first (the default)' }),
});

/** Every component of /openapi.json, by name. */
export const COMPONENTS = {
  PredictRequest, PredictUrlRequest, BatchPredictRequest, Detection, Timing, PredictResponse, ImageError, BatchPredictResponse, ErrorCode, Error: ErrorBody, DeviceEntry, ModelStatus, Health, Liveness, Ready, ModelList, Info,
} as const satisfies Record<string, TSchema>;
