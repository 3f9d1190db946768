// The DeepStack / CodeProject.AI object-detection API that NVRs (Blue Iris, Agent DVR) and Home Assistant's
// deepstack-python client call, on the /predict pipeline (predict.ts with a PredictDialect):
//   POST /v1/vision/detection            multipart: `image` (file), `min_confidence` (0..1, default 0.4),
//   POST /v1/vision/custom/{model}        `api_key` (others ignored) → {success: true, predictions: [{label, confidence, x_min,
//                                         y_min, x_max, y_max}] (integer pixels), count, message, inferenceMs,
//                                         processMs, moduleId, command, code: 200}
//   GET|POST /v1/vision/custom/list      {success: true, models: [ids]}
// /v1/vision/detection runs the served model; custom/{model} the one `model` names (served-models.ts: an id
// with a '/' cannot be one path segment, so the variant name, e.g. rf-detr-base, is the one to use there).
// Errors are DeepStack's shape, {success: false, error: …}, with this server's status and code.
// The API key: our own headers, `api_key` in the query string, or the `api_key` form field (auth.ts).
import type { Express, Request, Response } from 'express';
import { RfdetrError } from '../errors.ts';
import type { PredictResponse } from '../detect/pipeline.ts';
import { checkBodyKey, type ApiKeys } from './auth.ts';
import type { BodyLimits, PredictInput } from './body.ts';
import { answerAfterBody } from './discard-body.ts';
import { readMultipartBody } from './multipart-body.ts';
import { parsePredictParams, schemaError } from './params.ts';
import type { PredictDialect } from './predict-context.ts';
import type { ErrorFacts, ErrorResponder } from './respond.ts';
import { route } from './request-log.ts';
import type { ModelResolver } from './served-models.ts';

/** DeepStack's server-side default for min_confidence (deepstack-python sends its own, 0.45). */
export const DEEPSTACK_DEFAULT_MIN_CONFIDENCE = 0.4;
/** The form fields these routes read besides the image (each at most once). */
const FIELDS = ['min_confidence', 'api_key'] as const;
/**
 * Fields a request may carry in all: the others are ignored, as DeepStack's and CodeProject.AI's servers ignore
 * fields they do not know (an NVR may send its own); the cap bounds the parse.
 */
const MAX_FIELDS = 16;

export function isDeepstackPath(path: string): boolean {
  return path === '/v1/vision/detection' || /^\/v1\/vision\/custom\/[^/]+$/.test(path);
}

/** DeepStack's error body: `success: false` and `error`, plus this server's code, status and request id. */
export function deepstackErrorBody(e: ErrorFacts): object {
  const body: Record<string, unknown> = { success: false, error: e.message, code: e.status, error_type: e.code };
  if (e.details) for (const [k, v] of Object.entries(e.details)) if (!(k in body) && k !== 'wireCode' && k !== 'type') body[k] = v;
  body.request_id = e.requestId;
  return body;
}

function inputOf(fields: Record<string, unknown>, file: Buffer | undefined, res: Response, keys: ApiKeys): PredictInput {
  checkBodyKey(keys, res, fields.api_key);
  if (file === undefined) throw schemaError('image', 'a file part named "image" (PNG or JPEG bytes)', undefined);
  if (file.length === 0) throw new RfdetrError('E_IMAGE_UNDECODABLE', 'the image part is empty (0 bytes): expected PNG or JPEG bytes');
  const raw = fields.min_confidence;
  const c = raw === undefined ? DEEPSTACK_DEFAULT_MIN_CONFIDENCE : Number(raw);
  if (typeof raw === 'string' && (raw.trim() === '' || !Number.isFinite(c) || c < 0 || c > 1)) throw schemaError('min_confidence', 'a number between 0 and 1', raw);
  return { image: file, params: parsePredictParams({ threshold: c, max_detections: 300, mask_format: 'none' }, false), form: 'multipart' };
}

/** /predict's answer as DeepStack's (CodeProject.AI's fields too): corner boxes in whole pixels. */
export function deepstackResponseOf(r: PredictResponse): object {
  const predictions = r.detections.map((d) => {
    const [x1, y1, x2, y2] = d.box as [number, number, number, number];
    return { label: d.label, confidence: d.score, x_min: Math.round(x1), y_min: Math.round(y1), x_max: Math.round(x2), y_max: Math.round(y2) };
  });
  const labels = [...new Set(predictions.map((p) => p.label))];
  return {
    success: true,
    predictions,
    count: predictions.length,
    message: predictions.length === 0 ? 'No objects found' : `Found ${labels.join(', ')}`,
    inferenceMs: Math.round(r.timing_ms.inference),
    processMs: Math.round(r.timing_ms.total),
    moduleId: 'rfdetr-serve',
    command: 'detect',
    code: 200,
  };
}

export interface DeepstackRouteDeps {
  models: ModelResolver;
  keys: ApiKeys;
  limits: BodyLimits;
  /** The time a body may take to arrive (an unknown model's body is read and dropped within it). */
  bodyTimeoutMs: number;
  errors: ErrorResponder;
  handlePredict: (req: Request, res: Response, dialect: PredictDialect) => Promise<void>;
}

export function registerDeepstackRoutes(app: Express, d: DeepstackRouteDeps): void {
  const respond = (r: PredictResponse) => deepstackResponseOf(r);
  // `model`: the model the route names (resolved again once the body is in: a reload may have removed it);
  // absent: the first model.
  const readBody = (model: (() => string) | undefined): PredictDialect['readBody'] => async (req, res, form) => {
    if (form !== 'multipart') throw new RfdetrError('E_UNSUPPORTED_MEDIA', `Expected Content-Type multipart/form-data (an "image" file part) for ${req.path} but received ${JSON.stringify(req.headers['content-type'] ?? 'none')}`);
    const input = await readMultipartBody(req, d.limits, ['image', ...FIELDS], (fields, file) => inputOf(fields, file, res, d.keys), MAX_FIELDS);
    if (model) input.params.model = model();
    return input;
  };
  const list = (req: Request, res: Response) => {
    try {
      checkBodyKey(d.keys, res, req.query.api_key);
      res.json({ success: true, models: d.models.served().map((m) => m.alias) });
    } catch (e) {
      d.errors.send(res, e);
    }
  };
  app.get('/v1/vision/custom/list', route('/v1/vision/custom/list'), list);
  app.post('/v1/vision/custom/list', route('/v1/vision/custom/list'), list);
  const detection: PredictDialect = { readBody: readBody(undefined), respond, errors: d.errors };
  app.post('/v1/vision/detection', route('/v1/vision/detection'), (req, res) => void d.handlePredict(req, res, detection));
  app.post('/v1/vision/custom/:model', route('/v1/vision/custom/{model}'), (req, res) => {
    const name = String(req.params.model ?? '');
    // The model is resolved before the body is parsed (an unknown one costs no parse, memory or body slot; its
    // body is read and dropped so that an uploading client gets the 404, discard-body.ts), and again once the
    // body is in: a reload may change the models served between the two.
    try {
      d.models.resolve(name);
    } catch (e) {
      return answerAfterBody(req, { maxBytes: d.limits.maxBodyBytes, timeoutMs: d.bodyTimeoutMs }, () => d.errors.send(res, e));
    }
    void d.handlePredict(req, res, { readBody: readBody(() => d.models.resolve(name).id), respond, errors: d.errors });
  });
}
