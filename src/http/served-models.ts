// The one seam from a model name a request gives (/predict's `model`, Roboflow's `model_id`, DeepStack's
// `/v1/vision/custom/{model}`) to a model this server serves, as the routes see it. Each model answers to its id
// (serve --weights ID=DIR, the models file's "id"; without one, its /v1/models id, e.g. Roboflow/rf-detr-base)
// and to its alias (the variant's lower-case name, rf-detr-base, rf-detr-seg-nano, which fits in one URL path
// segment; a given id is its own alias). Any other name is E_MODEL_NOT_FOUND (404) naming the models served
// (model-lanes.ts). Asked at every call: a reload may change the list, and an external sidecar's hello its model.
import type { Request } from 'express';
import { inputSizeOf } from '../detect/pipeline.ts';
import type { ModelLane, ModelLanes } from './model-lanes.ts';

export type ModelTask = 'object-detection' | 'instance-segmentation';

export interface ServedModel {
  /** The id requests name it by (and /v1/models lists). */
  id: string;
  /** The other name it answers to (its variant's lower-case name), or the id itself. */
  alias: string;
  task: ModelTask;
  /** The model's input [height, width]. */
  inputSize: [number, number];
  /** Its labels by class index (a class filter's names). */
  labels: readonly string[];
}

export interface ModelResolver {
  /** The models served, in the order /v1/models lists them. */
  served(): ServedModel[];
  /** The model `name` names; E_MODEL_NOT_FOUND (404) naming the served models when none does. */
  resolve(name: string): ServedModel;
}

export function taskOf(task: string | undefined): ModelTask {
  return task === 'segment' ? 'instance-segmentation' : 'object-detection';
}

export function servedModelOf(l: ModelLane): ServedModel {
  return { id: l.id, alias: l.alias(), task: taskOf(l.backend.info?.task), inputSize: inputSizeOf(l.backend.info), labels: l.labels() };
}

export function createModelResolver(lanes: ModelLanes): ModelResolver {
  return {
    served: () => lanes.list().map(servedModelOf),
    resolve: (name) => servedModelOf(lanes.resolve(name)),
  };
}

/** The model a request names: its body's `model` field, else the query string's (any body form), else none (the first). */
export function requestedModel(req: Request, params: { model?: string | undefined } | undefined): string | undefined {
  const q = req.query.model;
  return params?.model ?? (typeof q === 'string' && q !== '' ? q : undefined);
}
