// served-models.ts: the one seam from a model name in a request to a model served (the Roboflow and DeepStack
// routes; several models later widen it): the /v1/models id and the variant name resolve, any other is a 404
// naming the served models, and the model is asked at every call (an external sidecar names it in its hello).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ERRORS } from '../../src/errors.ts';
import { createModelResolver } from '../../src/http/served-models.ts';
import { modelIdentityOf, type ModelIdentity } from '../../src/http/model-identity.ts';

test('served models: the id and the variant name resolve; another name is E_MODEL_NOT_FOUND (404) naming them', () => {
  let identity: ModelIdentity = modelIdentityOf(null, null);
  let task: string | undefined = 'detect';
  const r = createModelResolver(() => identity, () => task, () => [560, 560]);
  const base = { id: 'Roboflow/rf-detr-base', alias: 'rf-detr-base', task: 'object-detection', inputSize: [560, 560] };
  assert.deepEqual(r.resolve('Roboflow/rf-detr-base'), base);
  assert.deepEqual(r.resolve('rf-detr-base'), base);
  assert.throws(() => r.resolve('RF-DETR-base'), (e: any) => e.code === 'E_MODEL_NOT_FOUND' && ERRORS[e.code as 'E_MODEL_NOT_FOUND'].status === 404
    && /model "RF-DETR-base" is not served here: this server serves Roboflow\/rf-detr-base \(or rf-detr-base\)/.test(e.message)
    && JSON.stringify(e.details.models) === '["Roboflow/rf-detr-base"]');
  // Asked again at every call: the hello of an external sidecar may name another model after the server started.
  identity = modelIdentityOf('seg-nano', null);
  task = 'segment';
  assert.deepEqual(r.served(), [{ id: 'rf-detr-seg-nano', alias: 'rf-detr-seg-nano', task: 'instance-segmentation', inputSize: [560, 560] }]);
  assert.throws(() => r.resolve('rf-detr-base'), /serves rf-detr-seg-nano;/);
});
