// GET /openapi.json: the whole HTTP surface as OpenAPI 3.1. Every schema in it is one of schema.ts's, the same
// objects the request validator compiles; every error response lists the codes of that status from the one
// error table (src/errors.ts), with the limits the server enforces written into the descriptions.
import { ERRORS, type ErrorCode } from '../errors.ts';
import { modelIdentityOf, type ModelIdentity } from './model-identity.ts';
import { COMPONENTS } from './schema.ts';
import { DEFAULT_VIDEO_LIMITS } from './video-limits.ts';
import { VIDEO_COMPONENTS } from './video-schema.ts';
import { compatPaths } from './compat-openapi.ts';

export interface OpenApiLimits {
  maxImageBytes: number;
  maxImageSide: number;
  maxBodyBytes: number;
  /** The loaded variant; default RF-DETR-base. */
  model?: ModelIdentity;
}

/** The routes and their one method: the 405 handler and the document both read this. */
export const ROUTES = {
  '/health': 'GET', '/tt-liveness': 'GET', '/ready': 'GET', '/v1/health': 'GET', '/v1/models': 'GET',
  '/info': 'GET', '/metrics': 'GET', '/openapi.json': 'GET', '/docs': 'GET', '/predict': 'POST', '/predict/video': 'POST',
  // Roboflow Inference's and DeepStack's APIs (compat-roboflow.ts, compat-deepstack.ts).
  '/model/registry': 'GET', '/model/add': 'POST', '/infer/object_detection': 'POST', '/infer/instance_segmentation': 'POST',
  '/v1/vision/detection': 'POST', '/v1/vision/custom/list': 'POST',
} as const satisfies Record<string, 'GET' | 'POST'>;

const ref = (name: keyof typeof COMPONENTS | keyof typeof VIDEO_COMPONENTS) => ({ $ref: `#/components/schemas/${name}` });
const json = (schema: object) => ({ 'application/json': { schema } });

/** The codes of the error table that answer with `status`. */
export function codesWithStatus(status: number): ErrorCode[] {
  return (Object.keys(ERRORS) as ErrorCode[]).filter((c) => ERRORS[c].status === status);
}

/** An error response whose `code` is one of `codes` (all of them must share one status). */
function errorResponse(description: string, codes: readonly ErrorCode[]) {
  const schema = { allOf: [ref('Error'), { type: 'object', properties: { code: { enum: [...codes] } } }] };
  const retry = codes.some((c) => (ERRORS[c] as { retryAfter?: true }).retryAfter);
  return {
    description: `${description} (${codes.join(', ')})`,
    ...(retry ? { headers: { 'Retry-After': { schema: { type: 'integer' }, description: 'seconds' } } } : {}),
    content: json(schema),
  };
}

const methodNotAllowed = { $ref: '#/components/responses/MethodNotAllowed' };
const unauthorized = { $ref: '#/components/responses/Unauthorized' };
/** The probes never need a key (load balancers and kubelets probe without credentials). */
const OPEN = { security: [{}] };
const notServing = errorResponse('not serving: starting or restarting, draining, the sidecar failed, the backend closed; carries Retry-After', ['E_STARTING', 'E_DRAINING', 'E_SIDECAR_FAILED', 'E_CLOSED']);

export function buildOpenApi(l: OpenApiLimits): object {
  const model = l.model ?? modelIdentityOf(null, null);
  const mib = (b: number) => `${b} bytes (${(b / 2 ** 20).toFixed(1)} MiB)`;
  // Every route but the probes answers 401 when the server has API keys and the request carries none that is valid.
  const get = (summary: string, ok: object, extra: Record<string, object> = {}, open = false) => ({
    get: { summary, ...(open ? OPEN : {}), responses: { '200': ok, ...(open ? {} : { '401': unauthorized }), ...extra, '405': methodNotAllowed } },
  });
  const predictErrors = {
    '400': errorResponse(`undecodable or oversized image (max side ${l.maxImageSide} px, max ${mib(l.maxImageBytes)}), or a body whose Content-Encoding does not decompress; an empty image string is undecodable`, codesWithStatus(400).filter((c) => c !== 'E_USAGE')),
    '401': unauthorized,
    '403': errorResponse('image_url is off on this server, names a host not in --allow-url-host, redirects to another host or reaches a non-public address', ['E_URL_NOT_ALLOWED']),
    '404': errorResponse('`model` names a model this server does not serve: the detail and `models` list the ids served', ['E_MODEL_NOT_FOUND']),
    '405': methodNotAllowed,
    '408': errorResponse('the body did not arrive within the body timeout; the connection is closed', ['E_BODY_TIMEOUT']),
    '413': errorResponse(`request body larger than ${mib(l.maxBodyBytes)}`, ['E_BODY_TOO_LARGE']),
    '415': errorResponse('Content-Type is not application/json, multipart/form-data, image/* or application/octet-stream; a compressed multipart body', ['E_UNSUPPORTED_MEDIA']),
    '422': errorResponse('schema violation: `field` names the field, `expected` what it accepts; the detail says what was received', ['E_SCHEMA']),
    '500': errorResponse('the engine failed: detail is "inference failed: <Type>: <text>"; or a server bug', ['E_INFERENCE', 'E_SIDECAR_EXITED', 'E_PROTOCOL', 'E_VERSION_MISMATCH', 'E_INTERNAL']),
    '502': errorResponse('image_url could not be fetched: connection failed, not 200, too many redirects, or the time limit passed', ['E_URL_FETCH']),
    '503': errorResponse('not serving, or a budget is full (engine queue, bodies being received, body bytes); carries Retry-After', codesWithStatus(503)),
    '504': errorResponse('the per-request deadline (--deadline-ms) passed', ['E_DEADLINE']),
  };
  const textField = (description: string) => ({ type: 'string', description });
  return {
    openapi: '3.1.0',
    info: {
      title: 'rfdetr-serve',
      version: '1',
      description: `${model.name} (${model.id}) object detection, batch 1, at the variant's input size (GET /info: input.input_size; Base 560x560). Every response carries X-Request-Id (a client-sent one is echoed). A path not listed here answers 404 with the NotFound response; a listed path with another method answers 405 with Allow. When the server was started with API keys (--api-key-file or RFDETR_API_KEYS), every route but the probes needs one (bearer or apiKey); /metrics and /docs are open only when the operator says so (--open-metrics, --open-docs). Roboflow Inference's routes (/model/registry, /model/add, /infer/*) and DeepStack / CodeProject.AI's (/v1/vision/*) serve those servers' clients unchanged, on the same queue, budgets and keys (their api_key query parameter or body field is checked against the same keys); their bodies and errors are those APIs' shapes. A server may serve several models (serve --weights ID=DIR, --models FILE): GET /v1/models lists them, "model" picks one per request (default the first; the name given here is the first's), a name not served is 404.`,
    },
    // Either scheme, or none when the server runs without keys.
    security: [{ bearer: [] }, { apiKey: [] }, {}],
    paths: {
      '/health': get('Health (the reference app\'s contract): 200 always; status "ok" only while the engine is ready', { description: 'health', content: json(ref('Health')) }, {}, true),
      '/tt-liveness': get('Liveness: answers without touching the engine, also while a forward runs', { description: 'alive', content: json(ref('Liveness')) }, {}, true),
      '/ready': get('Readiness: 200 {} once the engine is ready; 503 while starting, restarting, failed or draining', { description: 'ready', content: json(ref('Ready')) }, { '503': notServing }, true),
      '/v1/health': get('Readiness (tt-media-server / vLLM shape): same as /ready', { description: 'ready', content: json(ref('Ready')) }, { '503': notServing }, true),
      '/info': get('Model, task, engine and device, weights (repo, revision, files), sources, input limits, labels, serving parameters', { description: 'info', content: json(ref('Info')) }),
      '/v1/models': get('The models served, each with its task, input size and state (OpenAI-shaped, so OpenAI-style tooling does not 404)', { description: 'models', content: json(ref('ModelList')) }),
      '/metrics': get('Prometheus metrics: requests by route/method/status, per-stage latency histograms, queue depth, in-flight, engine busy time, sidecar restarts, engine state', { description: 'text exposition format', content: { 'text/plain': { schema: { type: 'string' } } } }),
      '/openapi.json': get('This document', { description: 'OpenAPI 3.1', content: json({ type: 'object' }) }),
      '/docs': get('Interactive API documentation (Swagger UI over this document, served from the package: works offline)', { description: 'HTML page', content: { 'text/html': { schema: { type: 'string' } } } }),
      '/predict': {
        post: {
          summary: 'Detect objects in one image, or in several (images: [...], JSON bodies only)',
          parameters: [
            { name: 'threshold', in: 'query', schema: { type: 'string' }, description: 'raw image/* bodies only: number 0..1, default 0.5' },
            { name: 'max_detections', in: 'query', schema: { type: 'string' }, description: 'raw image/* bodies only: integer 1..300, default 100' },
            { name: 'return_raw', in: 'query', schema: { type: 'string', enum: ['true', 'false', '1', '0'] }, description: 'raw image/* bodies only' },
            { name: 'classes', in: 'query', schema: { type: 'string' }, description: 'raw image/* bodies only: class ids or label names, comma-separated (cat,dog,17)' },
            { name: 'return_image', in: 'query', schema: { type: 'string', enum: ['png', 'jpeg'] }, description: 'raw image/* bodies only' },
            { name: 'mask_format', in: 'query', schema: { type: 'string', enum: ['rle', 'polygon', 'none'] }, description: 'raw image/* bodies only: segmentation models\' mask as rle (default), polygon or none' },
            { name: 'model', in: 'query', schema: { type: 'string' }, description: 'which served model answers (any body form; a body\'s own `model` field wins): an id GET /v1/models lists, or a variant\'s lower-case name; default the first' },
            { name: 'X-Request-Id', in: 'header', schema: { type: 'string', pattern: '^[A-Za-z0-9._:@/+=-]{1,128}$' }, description: 'echoed back; generated when absent' },
          ],
          requestBody: {
            required: true,
            content: {
              'application/json': { schema: { oneOf: [ref('PredictRequest'), ref('PredictUrlRequest'), ref('BatchPredictRequest')] } },
              'multipart/form-data': {
                schema: {
                  type: 'object',
                  required: ['image'],
                  properties: {
                    image: { type: 'string', format: 'binary', description: `the image file (max ${mib(l.maxImageBytes)}); a base64 text field is also accepted` },
                    threshold: textField('number 0..1, default 0.5'),
                    max_detections: textField('integer 1..300, default 100'),
                    return_raw: textField('true/false/1/0, default false'),
                    classes: textField('class ids or label names, comma-separated (cat,dog,17)'),
                    return_image: { type: 'string', enum: ['png', 'jpeg'] },
                    model: textField('which served model answers (GET /v1/models); default the first'),
                    mask_format: { type: 'string', enum: ['rle', 'polygon', 'none'], description: 'segmentation models: rle (default), polygon or none' },
                  },
                },
              },
              'image/*': { schema: { type: 'string', format: 'binary', description: `the image bytes (max ${mib(l.maxImageBytes)})` } },
              'application/octet-stream': { schema: { type: 'string', format: 'binary' } },
            },
          },
          responses: {
            '200': {
              description: 'detections (PredictResponse), or for images: [...] one result per image (BatchPredictResponse)',
              headers: { 'Server-Timing': { schema: { type: 'string' }, description: "the request's timeline as name;dur=ms, in order from arrival to the serialised body (they add up to total); then gc and loop-delay, which overlap the stages (SERVING.md, Server-Timing)" } },
              content: json({ oneOf: [ref('PredictResponse'), ref('BatchPredictResponse')] }),
            },
            ...predictErrors,
          },
        },
      },
      '/predict/video': {
        post: {
          summary: 'Detect (and optionally track) objects in every frame of a video: one NDJSON line per frame as it is done, then a summary line',
          description: `The video is the body (video/*, application/octet-stream) or a multipart file part named "video"; the options come from the query string or multipart text fields. Frames go through the same engine queue as /predict images, so stills are answered while a video runs. Limits: ${mib(DEFAULT_VIDEO_LIMITS.maxBytes)} (--video-max-bytes), ${DEFAULT_VIDEO_LIMITS.maxDurationS} s (--video-max-duration-s), ${DEFAULT_VIDEO_LIMITS.maxFrames} frames (--video-max-frames), ${DEFAULT_VIDEO_LIMITS.maxVideos} videos at once (--video-max-concurrent; a video takes its slot once its upload is complete), ${DEFAULT_VIDEO_LIMITS.maxUploads} uploads arriving at once (--video-max-uploads, ${DEFAULT_VIDEO_LIMITS.clientUploads} per client), the upload within ${DEFAULT_VIDEO_LIMITS.bodyTimeoutMs / 1000} s and at least ${DEFAULT_VIDEO_LIMITS.minUploadRate} bytes/s on average after its first ${DEFAULT_VIDEO_LIMITS.uploadGraceMs / 1000} s (--video-min-upload-rate) by default. A client that disconnects stops the decoding. An error after the first line is the last line, {"error": {...}} (VideoErrorLine).`,
          parameters: [
            { name: 'threshold', in: 'query', schema: { type: 'string' }, description: 'number 0..1, default 0.5' },
            { name: 'max_detections', in: 'query', schema: { type: 'string' }, description: 'integer 1..300 per frame, default 100' },
            { name: 'classes', in: 'query', schema: { type: 'string' }, description: 'class ids or label names, comma-separated (cat,dog,17)' },
            { name: 'stride', in: 'query', schema: { type: 'string' }, description: 'run every Nth frame, integer 1..1000, default 1' },
            { name: 'track', in: 'query', schema: { type: 'string', enum: ['true', 'false', '1', '0'] }, description: 'add ByteTrack track_id to every detection, default false' },
            { name: 'mask_format', in: 'query', schema: { type: 'string', enum: ['rle', 'polygon', 'none'] }, description: 'segmentation models: each detection\'s mask as rle (default), polygon or none' },
            { name: 'model', in: 'query', schema: { type: 'string' }, description: 'which served model answers (any body form; a body\'s own `model` field wins): an id GET /v1/models lists, or a variant\'s lower-case name; default the first' },
            { name: 'X-Request-Id', in: 'header', schema: { type: 'string', pattern: '^[A-Za-z0-9._:@/+=-]{1,128}$' }, description: 'echoed back; generated when absent' },
          ],
          requestBody: {
            required: true,
            content: {
              'video/*': { schema: { type: 'string', format: 'binary', description: 'the video file (mp4, mkv, webm, mov, avi, MPEG-TS, … recognised by content)' } },
              'application/octet-stream': { schema: { type: 'string', format: 'binary' } },
              'multipart/form-data': {
                schema: {
                  type: 'object',
                  required: ['video'],
                  properties: {
                    video: { type: 'string', format: 'binary', description: 'the video file' },
                    threshold: textField('number 0..1, default 0.5'),
                    max_detections: textField('integer 1..300, default 100'),
                    classes: textField('class ids or label names, comma-separated (cat,dog,17)'),
                    stride: textField('integer 1..1000, default 1'),
                    track: textField('true/false/1/0, default false'),
                    model: textField('which served model answers (GET /v1/models); default the first'),
                    mask_format: { type: 'string', enum: ['rle', 'polygon', 'none'], description: 'segmentation models: rle (default), polygon or none' },
                  },
                },
              },
            },
          },
          responses: {
            '200': {
              description: 'chunked NDJSON: a VideoFrameLine per processed frame in order, then a VideoSummaryLine (or a VideoErrorLine)',
              content: { 'application/x-ndjson': { schema: { oneOf: [ref('VideoFrameLine'), ref('VideoSummaryLine'), ref('VideoErrorLine')] } } },
            },
            '400': errorResponse('not a video ffmpeg can decode, or a truncated file', ['E_VIDEO_UNDECODABLE']),
            '401': unauthorized,
            '404': errorResponse('`model` names a model this server does not serve: the detail and `models` list the ids served', ['E_MODEL_NOT_FOUND']),
            '405': methodNotAllowed,
            '408': errorResponse('the video did not arrive within the upload time limit, or arrived slower than --video-min-upload-rate after its grace; the connection is closed', ['E_BODY_TIMEOUT']),
            '413': errorResponse(`the video is larger than --video-max-bytes (default ${mib(DEFAULT_VIDEO_LIMITS.maxBytes)}), or its frames are over ${l.maxImageSide} px a side`, ['E_BODY_TOO_LARGE', 'E_VIDEO_TOO_LARGE']),
            '415': errorResponse('Content-Type is not video/*, application/octet-stream or multipart/form-data; a Content-Encoding', ['E_UNSUPPORTED_MEDIA']),
            '422': errorResponse('an option outside its range (`field`, `expected`), no "video" part, or a video longer than --video-max-duration-s or --video-max-frames', ['E_SCHEMA', 'E_VIDEO_TOO_LONG']),
            '500': errorResponse('the engine failed, ffmpeg is not installed on the server, or a server bug', ['E_INFERENCE', 'E_SIDECAR_EXITED', 'E_PROTOCOL', 'E_VERSION_MISMATCH', 'E_FFMPEG_MISSING', 'E_INTERNAL']),
            '503': errorResponse('not serving, --video-max-concurrent videos running when the upload is complete, --video-max-uploads uploads arriving (--video-client-uploads for this client), --video-disk-limit full, or the engine queue full; carries Retry-After', codesWithStatus(503)),
            '504': errorResponse('a frame waited longer than the per-request deadline (--deadline-ms), or ffprobe/ffmpeg gave no answer in time', ['E_DEADLINE', 'E_VIDEO_TIMEOUT']),
          },
        },
      },
      // The clients of other servers (SERVING.md, "Clients of other servers").
      ...compatPaths(),
      '/admin/reload': {
        post: {
          summary: 'Re-read the models file (as SIGHUP does) and apply it: a new or changed model is started and warmed, then takes the new requests while the old one drains and stops; a removed one answers 404. Only with serve --admin-key-file (else 404), and only with one of its keys (an API key is not one)',
          security: [{ bearer: [] }, { apiKey: [] }],
          responses: {
            '200': { description: 'the report: each model\'s outcome (added, swapped, removed, unchanged, failed) with ready_ms, drained_ms or error', content: json({ type: 'object', required: ['models'], properties: { models: { type: 'array', items: { type: 'object', required: ['id', 'outcome'], properties: { id: { type: 'string' }, outcome: { type: 'string', enum: ['added', 'swapped', 'removed', 'unchanged', 'failed'] }, ready_ms: { type: 'number' }, drained_ms: { type: 'number' }, error: { type: 'string' } } } } } }) },
            '400': errorResponse('the models file could not be read or is not valid: the detail says where and what was expected', ['E_USAGE']),
            '401': errorResponse('no admin key, or not one of --admin-key-file\'s', ['E_UNAUTHORIZED']),
            '404': { $ref: '#/components/responses/NotFound' },
          },
        },
      },
    },
    components: {
      schemas: JSON.parse(JSON.stringify({ ...COMPONENTS, ...VIDEO_COMPONENTS })) as Record<string, object>,
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: 'Authorization: Bearer KEY, a key from the server\'s --api-key-file or RFDETR_API_KEYS' },
        apiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key', description: 'the same key in X-API-Key (not both headers: a request with a key in each is refused, 401)' },
      },
      responses: {
        Unauthorized: {
          ...errorResponse('API keys are on and the request carries no valid one, or one in each of Authorization and X-API-Key (exactly one is expected)', ['E_UNAUTHORIZED']),
          headers: { 'WWW-Authenticate': { schema: { type: 'string' }, description: 'Bearer realm="rfdetr" (error="invalid_token" for a wrong key, error="invalid_request" for a key in both headers)' } },
        },
        NotFound: errorResponse('no such route: the detail lists the routes', ['E_NOT_FOUND']),
        MethodNotAllowed: {
          ...errorResponse('a known route with another method', ['E_METHOD_NOT_ALLOWED']),
          headers: { Allow: { schema: { type: 'string' }, description: 'the method the route takes' } },
        },
      },
    },
  };
}
