// Roboflow Inference's HTTP API, as its Python client (inference-sdk 1.8.3, v1 mode: any api_url that is not
// Roboflow's cloud) calls a self-hosted server, on the /predict pipeline (predict.ts with a PredictDialect):
//   GET  /model/registry                 {models: [{model_id, task_type, batch_size, input_height, input_width}]}
//   POST /model/add {model_id}           the same list; a model this server does not serve is a 404
//   POST /infer/object_detection         {model_id, image: {type: "base64", value}, confidence, max_detections,
//   POST /infer/instance_segmentation     class_filter, visualize_predictions, api_key, …} → Roboflow's response:
//        {inference_id, time, image: {width, height}, predictions: [{x, y, width, height (centre-based, pixels),
//        confidence, class, class_id, detection_id, points (segmentation: the mask's outer polygon)}]}
// The fields the client sends that mean nothing to RF-DETR (NMS knobs, active learning, preprocessing switches,
// usage tags) are accepted and ignored, as Roboflow's server ignores fields it does not know. Errors are
// Roboflow's shape, {"message": …} (its client reads `message`), with this server's status and code.
// The API key: `api_key` in the query string or the JSON body, or our own headers (auth.ts).
import { randomUUID } from 'node:crypto';
import express, { type Express, type Request, type Response } from 'express';
import { RfdetrError } from '../errors.ts';
import type { PredictResponse } from '../detect/pipeline.ts';
import { checkBodyKey, type ApiKeys } from './auth.ts';
import { fromParserError, runParser, type BodyLimits, type PredictInput } from './body.ts';
import { classFilterOf, decodeBase64Image, parsePredictParams, schemaError } from './params.ts';
import type { PredictDialect } from './predict-context.ts';
import type { ErrorFacts, ErrorResponder } from './respond.ts';
import { route } from './request-log.ts';
import type { ModelResolver, ModelTask, ServedModel } from './served-models.ts';

/** Roboflow's defaults for these fields (inference's ObjectDetectionInferenceRequest), not /predict's. */
export const ROBOFLOW_DEFAULT_CONFIDENCE = 0.4;
export const ROBOFLOW_DEFAULT_MAX_DETECTIONS = 300;

export const ROBOFLOW_ROUTES = {
  '/model/registry': 'GET',
  '/model/add': 'POST',
  '/infer/object_detection': 'POST',
  '/infer/instance_segmentation': 'POST',
} as const;

export function isRoboflowPath(path: string): boolean {
  return path in ROBOFLOW_ROUTES;
}

/**
 * Roboflow's error body: `message` (what its client shows), plus this server's code and request id. A 422 also
 * carries FastAPI's validation list (`detail: [{type, loc, msg}]`), the body Roboflow's server gives a field
 * that fails its schema, for code that reads that.
 */
export function roboflowErrorBody(e: ErrorFacts): object {
  const body: Record<string, unknown> = { message: e.message, error_type: e.code };
  if (e.status === 422) {
    const field = typeof e.details?.field === 'string' ? e.details.field : undefined;
    const loc = ['body', ...(field && !field.includes(' ') ? field.split(/[.[\]]+/).filter((p) => p !== '').map((p) => (/^\d+$/.test(p) ? Number(p) : p)) : [])];
    body.detail = [{ type: 'value_error', loc, msg: e.message }];
  }
  if (e.details) for (const [k, v] of Object.entries(e.details)) if (!(k in body) && k !== 'wireCode' && k !== 'type') body[k] = v;
  body.request_id = e.requestId;
  return body;
}

/** The registry entries: each model under each name it answers to (the client matches `model_id` exactly). */
function registryOf(models: readonly ServedModel[]): object {
  return {
    models: models.flatMap((m) => [...new Set([m.id, m.alias])].map((name) => ({
      model_id: name, task_type: m.task, batch_size: 1, input_height: m.inputSize[0], input_width: m.inputSize[1],
    }))),
  };
}

function numberField(body: Record<string, unknown>, name: string, min: number, max: number, integer: boolean, fallback: number): number {
  const v = body[name];
  if (v === undefined || v === null) return fallback;
  if (typeof v !== 'number' || !Number.isFinite(v) || v < min || v > max || (integer && !Number.isInteger(v))) {
    throw schemaError(name, `${integer ? 'an integer' : 'a number'} between ${min} and ${max}`, v);
  }
  return v;
}

/** The image of a Roboflow request: `{type: "base64", value}`; any other type is refused, saying why. */
function imageOf(v: unknown, maxImageBytes: number): Buffer {
  if (Array.isArray(v)) {
    throw schemaError('image', 'one image object per request (a list is a batch, which this server does not take on this route: inference-sdk sends one per request unless max_batch_size > 1)', v);
  }
  if (typeof v !== 'object' || v === null) throw schemaError('image', '{"type": "base64", "value": "<base64 PNG/JPEG>"}', v);
  const { type, value } = v as Record<string, unknown>;
  if (type === 'url') {
    throw new RfdetrError('E_URL_NOT_ALLOWED', 'image type "url" is refused: this server fetches no URLs for Roboflow clients; send the image itself as {"type": "base64", "value": "<base64 PNG/JPEG>"} (inference-sdk does when given a file path, a PIL image or a numpy array)');
  }
  if (type !== 'base64') throw schemaError('image.type', '"base64" (the only image type this server takes; numpy and pil payloads are pickles it will not load)', type);
  return decodeBase64Image(value, maxImageBytes);
}

/** The JSON body of /infer/*: the key checked, the model resolved, the fields mapped onto /predict's. */
function createInferReader(o: { limits: BodyLimits; models: ModelResolver; keys: ApiKeys; task: ModelTask; readJson: JsonReader }): PredictDialect['readBody'] {
  return async (req, res, form, onDecoded) => {
    if (form !== 'json') throw new RfdetrError('E_UNSUPPORTED_MEDIA', `Expected Content-Type application/json for ${req.path} but received ${JSON.stringify(req.headers['content-type'] ?? 'none')}: send {"model_id": "…", "image": {"type": "base64", "value": "…"}}`);
    const body = await o.readJson(req, res, onDecoded);
    if (typeof body !== 'object' || body === null || Array.isArray(body)) {
      throw schemaError('the request body', 'a JSON object like {"model_id": "…", "image": {"type": "base64", "value": "…"}}', body);
    }
    const b = body as Record<string, unknown>;
    checkBodyKey(o.keys, res, b.api_key);
    if (typeof b.model_id !== 'string' || b.model_id === '') throw schemaError('model_id', 'the id of a model this server serves (GET /model/registry lists them)', b.model_id);
    const model = o.models.resolve(b.model_id);
    if (o.task === 'instance-segmentation' && model.task !== 'instance-segmentation') {
      throw new RfdetrError('E_USAGE', `model ${JSON.stringify(b.model_id)} is an object-detection model, which has no masks: post it to /infer/object_detection`);
    }
    if (b.response_mask_format !== undefined && b.response_mask_format !== null && b.response_mask_format !== 'polygon') {
      throw schemaError('response_mask_format', '"polygon" (the only mask format this route answers)', b.response_mask_format);
    }
    const classes = b.class_filter;
    if (classes !== undefined && classes !== null && (!Array.isArray(classes) || classes.length === 0 || !classes.every((c) => typeof c === 'string' && c !== ''))) {
      throw schemaError('class_filter', 'a non-empty list of class names', classes);
    }
    // Checked here too, so a name the model lacks is named as the client sent it (class_filter[i]).
    if (classes) classFilterOf(classes as string[], model.labels, 'class_filter');
    if (b.visualize_predictions !== undefined && b.visualize_predictions !== null && typeof b.visualize_predictions !== 'boolean') {
      throw schemaError('visualize_predictions', 'a boolean', b.visualize_predictions);
    }
    const image = imageOf(b.image, o.limits.maxImageBytes);
    const params = parsePredictParams({
      threshold: numberField(b, 'confidence', 0, 1, false, ROBOFLOW_DEFAULT_CONFIDENCE),
      max_detections: numberField(b, 'max_detections', 1, ROBOFLOW_DEFAULT_MAX_DETECTIONS, true, ROBOFLOW_DEFAULT_MAX_DETECTIONS),
      ...(classes ? { classes } : {}),
      mask_format: o.task === 'instance-segmentation' ? 'polygon' : 'none',
      ...(b.visualize_predictions === true ? { return_image: 'jpeg' } : {}),
      model: model.id,
    }, false);
    return { image, params, form: 'json' } satisfies PredictInput;
  };
}

/** Twice the signed area of a polygon [x1, y1, x2, y2, …] (shoelace). */
function area2(p: readonly number[]): number {
  let a = 0;
  for (let i = 0; i + 1 < p.length; i += 2) {
    const j = (i + 2) % p.length;
    a += p[i]! * p[j + 1]! - p[j]! * p[i + 1]!;
  }
  return Math.abs(a);
}

/** /predict's answer as Roboflow's: centre-based boxes in pixels; a mask as its largest outer polygon. */
export function roboflowResponseOf(r: PredictResponse, task: ModelTask): object {
  const predictions = r.detections.map((d) => {
    const [x1, y1, x2, y2] = d.box as [number, number, number, number];
    const p: Record<string, unknown> = {
      x: (x1 + x2) / 2, y: (y1 + y2) / 2, width: x2 - x1, height: y2 - y1,
      confidence: d.score, class: d.label, class_id: d.label_id, detection_id: randomUUID(),
    };
    if (task === 'instance-segmentation') {
      const polygons = Array.isArray(d.mask) ? (d.mask as number[][]) : [];
      const largest = polygons.reduce<number[] | undefined>((best, q) => (best === undefined || area2(q) > area2(best) ? q : best), undefined) ?? [];
      const points: Array<{ x: number; y: number }> = [];
      for (let i = 0; i + 1 < largest.length; i += 2) points.push({ x: largest[i]!, y: largest[i + 1]! });
      p.points = points;
    }
    return p;
  });
  const out: Record<string, unknown> = {
    inference_id: randomUUID(),
    time: r.timing_ms.total / 1000,
    image: { width: r.image_size.width, height: r.image_size.height },
    predictions,
  };
  if (r.annotated_image) out.visualization = r.annotated_image.base64;
  return out;
}

/** Reads a JSON body as /predict's is (Content-Encoding inflated and counted by `onDecoded`), parsed to a value. */
export type JsonReader = (req: Request, res: Response, onDecoded?: (n: number) => void) => Promise<unknown>;

export interface RoboflowRouteDeps {
  readJson: JsonReader;
  models: ModelResolver;
  keys: ApiKeys;
  limits: BodyLimits;
  errors: ErrorResponder;
  /** POST /predict's handler, run with a dialect. */
  handlePredict: (req: Request, res: Response, dialect: PredictDialect) => Promise<void>;
}

export function registerRoboflowRoutes(app: Express, d: RoboflowRouteDeps): void {
  const keyOnly = (res: Response, value: unknown): boolean => {
    try {
      checkBodyKey(d.keys, res, value);
      return true;
    } catch (e) {
      d.errors.send(res, e);
      return false;
    }
  };
  app.get('/model/registry', route('/model/registry'), (req, res) => {
    if (keyOnly(res, req.query.api_key)) res.json(registryOf(d.models.served()));
  });
  const addJson = express.json({ limit: 64 * 1024, strict: false, type: () => true });
  app.post('/model/add', route('/model/add'), (req, res) => {
    runParser(addJson, req, res).then(() => {
      const b: unknown = req.body;
      if (typeof b !== 'object' || b === null || Array.isArray(b)) throw schemaError('the request body', 'a JSON object like {"model_id": "…"}', b);
      const body = b as Record<string, unknown>;
      checkBodyKey(d.keys, res, body.api_key);
      if (typeof body.model_id !== 'string' || body.model_id === '') throw schemaError('model_id', 'the id of a model this server serves (GET /model/registry lists them)', body.model_id);
      // This server loads no model on request: one it serves is "added" already; any other is a 404.
      d.models.resolve(body.model_id);
      res.json(registryOf(d.models.served()));
    }).catch((e: unknown) => d.errors.send(res, fromParserError(e, { maxBodyBytes: 64 * 1024, maxImageBytes: 0 }, 'json')));
  });
  for (const [path, task] of [['/infer/object_detection', 'object-detection'], ['/infer/instance_segmentation', 'instance-segmentation']] as const) {
    const dialect: PredictDialect = {
      readBody: createInferReader({ limits: d.limits, models: d.models, keys: d.keys, task, readJson: d.readJson }),
      respond: (r) => roboflowResponseOf(r, task),
      errors: d.errors,
    };
    app.post(path, route(path), (req, res) => void d.handlePredict(req, res, dialect));
  }
}
