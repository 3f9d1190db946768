// GET /openapi.json: the whole HTTP surface as OpenAPI 3.1, built from the same limits the server enforces.
import { DEFAULT_MAX_DETECTIONS, DEFAULT_THRESHOLD, MAX_DETECTIONS_LIMIT } from './params.ts';

export interface OpenApiLimits {
  maxImageBytes: number;
  maxImageSide: number;
  maxBodyBytes: number;
}

const json = (schemaRef: string) => ({ 'application/json': { schema: { $ref: `#/components/schemas/${schemaRef}` } } });
const errorResponse = (description: string) => ({ description, content: json('Error') });

export function buildOpenApi(l: OpenApiLimits): object {
  const imageText = `base64 PNG or JPEG bytes (max side ${l.maxImageSide} px, max ${l.maxImageBytes} bytes decoded); a data:image/...;base64, prefix and line-wrapped base64 are accepted`;
  const paramsProps = {
    threshold: { type: 'number', minimum: 0, maximum: 1, default: DEFAULT_THRESHOLD, description: 'keep detections with sigmoid(logit) > threshold' },
    max_detections: { type: 'integer', minimum: 1, maximum: MAX_DETECTIONS_LIMIT, default: DEFAULT_MAX_DETECTIONS, description: 'keep at most this many, highest scores first' },
    return_raw: { type: 'boolean', default: false, description: 'also return raw.logits [300][91] and raw.pred_boxes [300][4] (normalised cxcywh)' },
  };
  const four = { type: 'array', items: { type: 'number' }, minItems: 4, maxItems: 4 };
  const predictErrors = {
    '400': errorResponse('undecodable or oversized image (E_IMAGE_UNDECODABLE, E_IMAGE_TOO_LARGE); an empty image string is undecodable'),
    '413': errorResponse(`request body larger than ${l.maxBodyBytes} bytes (E_BODY_TOO_LARGE)`),
    '415': errorResponse('Content-Type is not application/json, multipart/form-data, image/* or application/octet-stream (E_UNSUPPORTED_MEDIA)'),
    '422': errorResponse('schema violation: missing or non-string image, threshold outside 0..1, max_detections not an integer in 1..300, return_raw not a boolean, body not a JSON object (E_SCHEMA)'),
    '500': errorResponse('the engine failed: detail is "inference failed: <Type>: <text>"'),
    '503': {
      description: 'starting (E_STARTING), queue full (E_QUEUE_FULL), draining (E_DRAINING) or engine failed (E_SIDECAR_FAILED); carries Retry-After',
      headers: { 'Retry-After': { schema: { type: 'integer' }, description: 'seconds' } },
      content: json('Error'),
    },
    '504': errorResponse('the per-request deadline (--deadline-ms) passed (E_DEADLINE)'),
  };
  return {
    openapi: '3.1.0',
    info: {
      title: 'rfdetr-serve',
      version: '1',
      description: 'RF-DETR-base (Roboflow/rf-detr-base, COCO-91) object detection. One image per request, batch 1, input 560x560. Every response carries X-Request-Id (a client-sent one is echoed).',
    },
    paths: {
      '/health': {
        get: {
          summary: 'Health (seed contract): 200 always; status "ok" only while the engine is ready',
          responses: { '200': { description: 'health', content: json('Health') } },
        },
      },
      '/tt-liveness': {
        get: {
          summary: 'Liveness: answers without touching the engine, also while a forward runs',
          responses: { '200': { description: 'alive', content: json('Liveness') } },
        },
      },
      '/ready': {
        get: {
          summary: 'Readiness: 200 {} once the engine is ready; 503 while starting, restarting, failed or draining',
          responses: { '200': { description: 'ready', content: { 'application/json': { schema: { type: 'object', maxProperties: 0 } } } }, '503': predictErrors['503'] },
        },
      },
      '/v1/health': {
        get: {
          summary: 'Readiness (tt-media-server / vLLM shape): same as /ready',
          responses: { '200': { description: 'ready', content: { 'application/json': { schema: { type: 'object', maxProperties: 0 } } } }, '503': predictErrors['503'] },
        },
      },
      '/info': {
        get: {
          summary: 'Model, task, engine and device, weights (repo, revision, files), sources, input limits, labels, serving parameters',
          responses: { '200': { description: 'info', content: { 'application/json': { schema: { type: 'object' } } } } },
        },
      },
      '/v1/models': {
        get: {
          summary: 'OpenAI-shaped model list (so OpenAI-style tooling does not 404)',
          responses: { '200': { description: 'models', content: json('ModelList') } },
        },
      },
      '/metrics': {
        get: {
          summary: 'Prometheus metrics: requests by route/method/status, per-stage latency histograms, queue depth, in-flight, engine busy time, sidecar restarts, engine state',
          responses: { '200': { description: 'text exposition format', content: { 'text/plain': { schema: { type: 'string' } } } } },
        },
      },
      '/openapi.json': {
        get: { summary: 'This document', responses: { '200': { description: 'OpenAPI 3.1', content: { 'application/json': { schema: { type: 'object' } } } } } },
      },
      '/predict': {
        post: {
          summary: 'Detect objects in one image',
          parameters: [
            { name: 'threshold', in: 'query', schema: paramsProps.threshold, description: 'raw image/* bodies only' },
            { name: 'max_detections', in: 'query', schema: paramsProps.max_detections, description: 'raw image/* bodies only' },
            { name: 'return_raw', in: 'query', schema: { type: 'string', enum: ['true', 'false', '1', '0'] }, description: 'raw image/* bodies only' },
            { name: 'X-Request-Id', in: 'header', schema: { type: 'string', pattern: '^[A-Za-z0-9._:@/+=-]{1,128}$' }, description: 'echoed back; generated when absent' },
          ],
          requestBody: {
            required: true,
            content: {
              'application/json': { schema: { $ref: '#/components/schemas/PredictRequest' } },
              'multipart/form-data': {
                schema: {
                  type: 'object',
                  required: ['image'],
                  properties: {
                    image: { type: 'string', format: 'binary', description: `the image file (max ${l.maxImageBytes} bytes); a base64 text field is also accepted` },
                    threshold: { type: 'string', description: 'number 0..1, default 0.5' },
                    max_detections: { type: 'string', description: 'integer 1..300, default 100' },
                    return_raw: { type: 'string', description: 'true/false/1/0, default false' },
                  },
                },
              },
              'image/*': { schema: { type: 'string', format: 'binary', description: `the image bytes (max ${l.maxImageBytes})` } },
              'application/octet-stream': { schema: { type: 'string', format: 'binary' } },
            },
          },
          responses: {
            '200': {
              description: 'detections',
              headers: { 'Server-Timing': { schema: { type: 'string' }, description: 'the timing_ms stages as name;dur=ms' } },
              content: json('PredictResponse'),
            },
            ...predictErrors,
          },
        },
      },
    },
    components: {
      schemas: {
        PredictRequest: {
          type: 'object',
          required: ['image'],
          properties: { image: { type: 'string', description: imageText }, ...paramsProps },
        },
        Detection: {
          type: 'object',
          required: ['label', 'label_id', 'score', 'box', 'box_cxcywh_norm'],
          properties: {
            label: { type: 'string', description: 'COCO name from config.json id2label ("N/A" for unused ids)' },
            label_id: { type: 'integer', minimum: 0, maximum: 90, description: 'COCO-91 class index' },
            score: { type: 'number', description: 'max over classes of sigmoid(logit)' },
            box: { ...four, description: '[x1, y1, x2, y2] in original-image pixels, clamped to the image' },
            box_cxcywh_norm: { ...four, description: "the model's normalised [cx, cy, w, h], unclamped" },
          },
        },
        PredictResponse: {
          type: 'object',
          required: ['detections', 'num_detections', 'image_size', 'input_size', 'threshold', 'timing_ms'],
          properties: {
            detections: { type: 'array', items: { $ref: '#/components/schemas/Detection' }, description: 'sorted by score descending' },
            num_detections: { type: 'integer' },
            image_size: { type: 'object', properties: { width: { type: 'integer' }, height: { type: 'integer' } }, required: ['width', 'height'] },
            input_size: { type: 'array', items: { type: 'integer' }, minItems: 2, maxItems: 2, description: '[560, 560]' },
            threshold: { type: 'number' },
            timing_ms: {
              type: 'object',
              description: 'milliseconds, not rounded',
              required: ['decode', 'preprocess', 'inference', 'postprocess', 'total', 'queue', 'transfer'],
              properties: {
                decode: { type: 'number', description: 'image bytes to RGB' },
                preprocess: { type: 'number', description: 'resize to 560x560 and normalise' },
                inference: { type: 'number', description: 'the engine forward, as the sidecar measured it' },
                postprocess: { type: 'number', description: 'scores, threshold, sort, boxes' },
                total: { type: 'number', description: 'arrival of the request to the response being built (includes the body upload)' },
                queue: { type: 'number', description: 'waiting for a decode slot and for the engine' },
                transfer: { type: 'number', description: 'the sidecar round trip minus the forward (framing, socket)' },
              },
            },
            raw: {
              type: 'object',
              description: 'only with return_raw',
              properties: {
                logits: { type: 'array', items: { type: 'array', items: { type: 'number' } }, description: '[300][91] pre-sigmoid' },
                pred_boxes: { type: 'array', items: { type: 'array', items: { type: 'number' } }, description: '[300][4] normalised cxcywh' },
              },
            },
          },
        },
        Health: {
          type: 'object',
          required: ['status', 'model', 'device'],
          properties: { status: { enum: ['ok', 'starting'] }, model: { const: 'RF-DETR-base' }, device: { type: ['string', 'null'] } },
        },
        Liveness: {
          type: 'object',
          required: ['status', 'model_ready'],
          properties: {
            status: { const: 'alive' },
            model_ready: { type: 'boolean' },
            engine_state: { enum: ['starting', 'ready', 'restarting', 'failed', 'stopped'] },
            draining: { type: 'boolean' },
            model: { type: 'string' },
            uptime_s: { type: 'number' },
            queue_depth: { type: 'integer' },
            in_flight: { type: 'integer' },
          },
        },
        ModelList: {
          type: 'object',
          properties: {
            object: { const: 'list' },
            data: { type: 'array', items: { type: 'object', properties: { id: { type: 'string' }, object: { const: 'model' }, owned_by: { type: 'string' } } } },
          },
        },
        Error: {
          type: 'object',
          required: ['detail', 'code', 'request_id'],
          properties: {
            detail: { type: 'string', description: 'what was wrong and what was expected' },
            code: { type: 'string', description: 'error code from the server error table, e.g. E_SCHEMA' },
            request_id: { type: 'string' },
            field: { type: 'string', description: 'for E_SCHEMA: the offending field' },
            expected: { type: 'string', description: 'for E_SCHEMA: what the field accepts' },
          },
        },
      },
    },
  };
}
