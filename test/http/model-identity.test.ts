// The loaded variant is named by every route that names the model: a Nano checkpoint is served as RF-DETR-nano
// with its own id, Base keeps the seed contract's RF-DETR-base / Roboflow/rf-detr-base.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { synthBinary } from '../../src/config/paths.ts';
import { modelIdentityOf } from '../../src/http/model-identity.ts';
import { checkpointVariant } from '../../src/weights/verify.ts';
import { synthVariantWeights, synthWeights } from '../helpers/synth-weights.ts';
import { start } from './helpers.ts';

test('checkpointVariant reads the variant from the tensors: base for the seed-1 checkpoint, nano for a Nano one', async (t) => {
  assert.equal(checkpointVariant(path.join(await synthWeights(), 'model.safetensors')), 'base');
  assert.equal(checkpointVariant('/nonexistent/model.safetensors'), null);
  assert.ok(fs.existsSync(synthBinary()), `${synthBinary()} is not built: run npm run build:sidecar (the repo builds it, so its absence is a failure)`);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rfdetr-nano-'));
  try {
    await execa(synthBinary(), ['--seed', '1', '--variant', 'nano', '--out', dir, '--quiet']);
    assert.equal(checkpointVariant(path.join(dir, 'model.safetensors')), 'nano');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('checkpointVariant names a synthetic RF-DETR Seg checkpoint seg-nano', async () => {
  assert.equal(checkpointVariant(path.join(await synthVariantWeights('seg-nano'), 'model.safetensors')), 'seg-nano');
});

test('modelIdentityOf: Base under the contract\'s names, other variants under their own; a Hub repo is the id', () => {
  assert.deepEqual(modelIdentityOf('base', null), { name: 'RF-DETR-base', id: 'Roboflow/rf-detr-base' });
  assert.deepEqual(modelIdentityOf(null, null), { name: 'RF-DETR-base', id: 'Roboflow/rf-detr-base' });
  assert.deepEqual(modelIdentityOf('nano', null), { name: 'RF-DETR-nano', id: 'rf-detr-nano' });
  assert.deepEqual(modelIdentityOf('large_deprecated', null), { name: 'RF-DETR-large_deprecated', id: 'rf-detr-large-deprecated' });
  assert.deepEqual(modelIdentityOf('small', 'someone/rf-detr-small-finetuned'), { name: 'RF-DETR-small', id: 'someone/rf-detr-small-finetuned' });
  assert.deepEqual(modelIdentityOf('seg-nano', null), { name: 'RF-DETR-Seg-Nano', id: 'rf-detr-seg-nano' });
  assert.deepEqual(modelIdentityOf('seg-xlarge', null), { name: 'RF-DETR-Seg-XLarge', id: 'rf-detr-seg-xlarge' });
  assert.deepEqual(modelIdentityOf('seg-2xlarge', null), { name: 'RF-DETR-Seg-2XLarge', id: 'rf-detr-seg-2xlarge' });
});

test('/health, /info, /v1/models, /tt-liveness and the OpenAPI description name the loaded variant', async () => {
  const s = await start({ model: modelIdentityOf('nano', null) });
  try {
    const get = async (route: string) => (await fetch(`${s.url}${route}`)).json() as Promise<any>;
    assert.equal((await get('/health')).model, 'RF-DETR-nano');
    const info = await get('/info');
    assert.equal(info.model, 'RF-DETR-nano');
    assert.equal(info.model_id, 'rf-detr-nano');
    assert.deepEqual((await get('/v1/models')).data.map((m: { id: string }) => m.id), ['rf-detr-nano']);
    assert.equal((await get('/tt-liveness')).model, 'rf-detr-nano');
    assert.match((await get('/openapi.json')).info.description, /^RF-DETR-nano \(rf-detr-nano\) object detection/);
  } finally {
    await s.stop();
  }
});
