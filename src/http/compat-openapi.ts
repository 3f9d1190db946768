// The OpenAPI paths of the routes that speak other servers' APIs (compat-roboflow.ts, compat-deepstack.ts): their
// bodies are those APIs' shapes, so each error is that API's error body (`default`), whatever its status (the
// status and code are this server's error table's, src/errors.ts).
import { DEEPSTACK_DEFAULT_MIN_CONFIDENCE } from './compat-deepstack.ts';
import { ROBOFLOW_DEFAULT_CONFIDENCE, ROBOFLOW_DEFAULT_MAX_DETECTIONS } from './compat-roboflow.ts';

const json = (schema: object) => ({ 'application/json': { schema } });
const num = { type: 'number' };
const int = { type: 'integer' };
const str = { type: 'string' };

const RoboflowError = {
  type: 'object', required: ['message'],
  properties: {
    message: { type: 'string', description: 'what was wrong and what to do (inference-sdk shows it)' },
    error_type: { type: 'string', description: "this server's error code (E_…)" },
    detail: { type: 'array', description: "422 only: FastAPI's validation list, as Roboflow's server answers a field that fails its schema", items: { type: 'object', required: ['type', 'loc', 'msg'], properties: { type: str, loc: { type: 'array', items: { type: ['string', 'integer'] } }, msg: str } } },
  },
};
const DeepstackError = {
  type: 'object', required: ['success', 'error'],
  properties: { success: { const: false }, error: str, code: { type: 'integer', description: 'the HTTP status' }, error_type: { type: 'string', description: "this server's error code (E_…)" } },
};
const Registry = {
  type: 'object', required: ['models'],
  properties: {
    models: {
      type: 'array', description: 'the served model under each name it answers to (its /v1/models id and its variant name, e.g. rf-detr-base)',
      items: { type: 'object', required: ['model_id', 'task_type'], properties: { model_id: str, task_type: { enum: ['object-detection', 'instance-segmentation'] }, batch_size: int, input_height: int, input_width: int } },
    },
  },
};
const prediction = (points: boolean) => ({
  type: 'object', required: ['x', 'y', 'width', 'height', 'confidence', 'class', 'class_id', 'detection_id', ...(points ? ['points'] : [])],
  properties: {
    x: { type: 'number', description: "the box's centre, pixels" }, y: num, width: num, height: num, confidence: num,
    class: str, class_id: int, detection_id: { type: 'string', description: 'a fresh UUID' },
    ...(points ? { points: { type: 'array', description: "the mask's largest outer polygon, pixels", items: { type: 'object', required: ['x', 'y'], properties: { x: num, y: num } } } } : {}),
  },
});
const inferResponse = (points: boolean) => ({
  type: 'object', required: ['time', 'image', 'predictions'],
  properties: {
    inference_id: str, time: { type: 'number', description: 'seconds from arrival to the response' },
    image: { type: 'object', required: ['width', 'height'], properties: { width: int, height: int } },
    predictions: { type: 'array', items: prediction(points) },
    visualization: { type: 'string', description: 'visualize_predictions: the annotated picture, base64 JPEG' },
  },
});
const inferRequest = {
  type: 'object', required: ['model_id', 'image'],
  description: 'fields inference-sdk sends that RF-DETR has no use for (iou_threshold, class_agnostic_nms, max_candidates, disable_active_learning, disable_preproc_*, source, …) are accepted and ignored',
  properties: {
    model_id: { type: 'string', description: 'a served model (GET /model/registry); any other is a 404' },
    api_key: { type: 'string', description: 'when the server has API keys: one of them (or send it in a header)' },
    image: { type: 'object', required: ['type', 'value'], properties: { type: { const: 'base64', description: '"url" is refused (403): this server fetches no URLs; numpy and pil are refused (422)' }, value: str } },
    confidence: { type: 'number', minimum: 0, maximum: 1, default: ROBOFLOW_DEFAULT_CONFIDENCE },
    max_detections: { type: 'integer', minimum: 1, maximum: ROBOFLOW_DEFAULT_MAX_DETECTIONS, default: ROBOFLOW_DEFAULT_MAX_DETECTIONS },
    class_filter: { type: 'array', items: str, description: 'class names to keep' },
    visualize_predictions: { type: 'boolean', default: false },
  },
};
const roboflowOp = (summary: string, ok: object, requestBody?: object) => ({
  summary, ...(requestBody ? { requestBody: { required: true, content: json(requestBody) } } : {}),
  responses: { '200': { description: 'ok', content: json(ok) }, default: { description: "an error, in Roboflow's shape", content: json(RoboflowError) } },
});
const DeepstackDetection = {
  type: 'object', required: ['success', 'predictions', 'count'],
  properties: {
    success: { const: true },
    predictions: { type: 'array', items: { type: 'object', required: ['label', 'confidence', 'x_min', 'y_min', 'x_max', 'y_max'], properties: { label: str, confidence: num, x_min: int, y_min: int, x_max: int, y_max: int } } },
    count: int, message: str, inferenceMs: int, processMs: int, moduleId: str, command: str, code: int,
  },
};
const deepstackForm = {
  'multipart/form-data': {
    schema: {
      type: 'object', required: ['image'],
      properties: {
        image: { type: 'string', format: 'binary' },
        min_confidence: { type: 'string', description: `number 0..1, default ${DEEPSTACK_DEFAULT_MIN_CONFIDENCE}` },
        api_key: { type: 'string', description: 'when the server has API keys: one of them (or send it in a header)' },
      },
    },
  },
};
const deepstackErrors = { default: { description: "an error, in DeepStack's shape", content: json(DeepstackError) } };
const deepstackDetect = (summary: string, parameters: object[] = []) => ({
  post: { summary, parameters, requestBody: { required: true, content: deepstackForm }, responses: { '200': { description: 'detections', content: json(DeepstackDetection) }, ...deepstackErrors } },
});
const list = { summary: 'DeepStack: the models /v1/vision/custom/{model} takes', responses: { '200': { description: 'models', content: json({ type: 'object', required: ['success', 'models'], properties: { success: { const: true }, models: { type: 'array', items: str } } }) }, ...deepstackErrors } };

export function compatPaths(): Record<string, object> {
  return {
    '/model/registry': { get: roboflowOp('Roboflow Inference: the models served (inference-sdk asks before each infer)', Registry) },
    '/model/add': { post: roboflowOp('Roboflow Inference: "load" a model: a served one answers the registry; this server loads nothing on request (any other: 404)', Registry, { type: 'object', required: ['model_id'], properties: { model_id: str, api_key: str } }) },
    '/infer/object_detection': { post: roboflowOp("Roboflow Inference: detect objects (inference-sdk's infer)", inferResponse(false), inferRequest) },
    '/infer/instance_segmentation': { post: roboflowOp('Roboflow Inference: detect objects with their mask polygons (a Seg model)', inferResponse(true), inferRequest) },
    '/v1/vision/detection': deepstackDetect('DeepStack / CodeProject.AI: detect objects with the served model'),
    '/v1/vision/custom/{model}': deepstackDetect('DeepStack / CodeProject.AI: detect objects with the model named (its variant name, e.g. rf-detr-base; /v1/vision/custom/list)', [{ name: 'model', in: 'path', required: true, schema: str }]),
    '/v1/vision/custom/list': { get: list, post: list },
  };
}
