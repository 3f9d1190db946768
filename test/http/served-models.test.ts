// served-models.ts: the one seam from a model name in a request to a model served (/predict's `model`, the
// Roboflow and DeepStack routes): each model's id and its alias resolve, any other name is a 404 naming the
// served models, and the models are asked at every call (a reload changes them; an external sidecar names its
// model in its hello).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ERRORS } from '../../src/errors.ts';
import { createModelResolver } from '../../src/http/served-models.ts';
import { modelIdentityOf, type ModelIdentity } from '../../src/http/model-identity.ts';
import { laneOf, ModelLanes, type ModelSpec } from '../../src/http/model-lanes.ts';
import { EngineState } from '../../src/http/engine-state.ts';
import { EngineQueue } from '../../src/http/engine-queue.ts';
import { ServerMetrics } from '../../src/http/metrics.ts';
import { FakeBackend } from './helpers.ts';

function lanesOf(specs: ModelSpec[]): ModelLanes {
  const metrics = new ServerMetrics({ defaultMetrics: false });
  return new ModelLanes((s, primary) => {
    const identity = typeof s.model === 'function' ? s.model : () => (s.model as ModelIdentity | undefined) ?? modelIdentityOf(null, null);
    return laneOf({
      fixedId: s.id, identity, backend: s.backend, engineState: new EngineState(s.backend, metrics, { primary }),
      engine: new EngineQueue(s.backend), weights: undefined, params: {}, labels: () => s.backend.info?.labels ?? [],
    });
  }, specs, specs.length);
}

test('served models: the id and the variant name resolve; another name is E_MODEL_NOT_FOUND (404) naming them', () => {
  let identity: ModelIdentity = modelIdentityOf(null, null);
  const backend = new FakeBackend();
  const r = createModelResolver(lanesOf([{ backend, model: () => identity }]));
  const base = { id: 'Roboflow/rf-detr-base', alias: 'rf-detr-base', task: 'object-detection', inputSize: [560, 560] };
  const view = (m: ReturnType<typeof r.resolve>) => ({ id: m.id, alias: m.alias, task: m.task, inputSize: m.inputSize });
  assert.deepEqual(view(r.resolve('Roboflow/rf-detr-base')), base);
  assert.deepEqual(view(r.resolve('rf-detr-base')), base);
  assert.throws(() => r.resolve('RF-DETR-base'), (e: any) => e.code === 'E_MODEL_NOT_FOUND' && ERRORS[e.code as 'E_MODEL_NOT_FOUND'].status === 404
    && /model "RF-DETR-base" is not served here: this server serves Roboflow\/rf-detr-base \(or rf-detr-base\)/.test(e.message)
    && JSON.stringify(e.details.models) === '["Roboflow/rf-detr-base"]');
  // Asked again at every call: the hello of an external sidecar may name another model after the server started.
  identity = modelIdentityOf('seg-nano', null);
  backend.info = { ...backend.info!, task: 'segment' };
  assert.deepEqual(r.served().map(view), [{ id: 'rf-detr-seg-nano', alias: 'rf-detr-seg-nano', task: 'instance-segmentation', inputSize: [560, 560] }]);
  assert.throws(() => r.resolve('rf-detr-base'), /serves rf-detr-seg-nano;/);
});

test('served models: several, each under its given id (its own alias); the 404 names every one', () => {
  const r = createModelResolver(lanesOf([
    { backend: new FakeBackend() },
    { id: 'nano', backend: new FakeBackend(), model: modelIdentityOf('nano', null) },
    { id: 'base-b', backend: new FakeBackend() },
  ]));
  assert.deepEqual(r.served().map((m) => [m.id, m.alias]), [['Roboflow/rf-detr-base', 'rf-detr-base'], ['nano', 'nano'], ['base-b', 'base-b']]);
  assert.equal(r.resolve('base-b').id, 'base-b');
  assert.equal(r.resolve('rf-detr-base').id, 'Roboflow/rf-detr-base');
  assert.throws(() => r.resolve('rf-detr-nano'), (e: any) => e.code === 'E_MODEL_NOT_FOUND'
    && /serves Roboflow\/rf-detr-base \(or rf-detr-base\), nano, base-b;/.test(e.message)
    && JSON.stringify(e.details.models) === '["Roboflow/rf-detr-base","nano","base-b"]');
});

test('served models: two models under one id are refused, naming it', () => {
  assert.throws(() => lanesOf([{ id: 'x', backend: new FakeBackend() }, { id: 'x', backend: new FakeBackend() }]), /two models have the id "x"/);
});
