// The one seam from a model name a request gives (Roboflow's `model_id`, DeepStack's `/v1/vision/custom/{model}`)
// to a model this server serves. Today the server serves one model; it answers to its /v1/models id (e.g.
// Roboflow/rf-detr-base) and to its variant's lower-case name (rf-detr-base, rf-detr-seg-nano), the form that
// fits in one URL path segment. Any other name is E_MODEL_NOT_FOUND (404) naming the models served. Several
// models (issue 35, item 1) widen `served()` to a list and `resolve` picks from it; the routes do not change.
import { RfdetrError } from '../errors.ts';
import type { ModelIdentity } from './model-identity.ts';

export type ModelTask = 'object-detection' | 'instance-segmentation';

export interface ServedModel {
  /** The /v1/models id. */
  id: string;
  /** The other name it answers to (its variant's lower-case name), or the id itself. */
  alias: string;
  task: ModelTask;
  /** The model's input [height, width]. */
  inputSize: [number, number];
}

export interface ModelResolver {
  /** The models served, in the order /v1/models lists them. */
  served(): ServedModel[];
  /** The model `name` names; E_MODEL_NOT_FOUND (404) naming the served models when none does. */
  resolve(name: string): ServedModel;
}

/** `identity`, `task` and `inputSize` are asked at every call: an external sidecar's model is known only from its hello. */
export function createModelResolver(identity: () => ModelIdentity, task: () => string | undefined, inputSize: () => [number, number]): ModelResolver {
  const served = (): ServedModel[] => {
    const m = identity();
    return [{ id: m.id, alias: m.name.toLowerCase(), task: task() === 'segment' ? 'instance-segmentation' : 'object-detection', inputSize: inputSize() }];
  };
  return {
    served,
    resolve(name) {
      const models = served();
      const found = models.find((m) => m.id === name || m.alias === name);
      if (found) return found;
      const names = models.map((m) => (m.alias === m.id ? m.id : `${m.id} (or ${m.alias})`)).join(', ');
      throw new RfdetrError('E_MODEL_NOT_FOUND', `model ${JSON.stringify(name)} is not served here: this server serves ${names}; ask GET /v1/models for the list and use one of those ids`, { models: models.map((m) => m.id) });
    },
  };
}
