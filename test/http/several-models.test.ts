// Several models in one server (model-lanes.ts) on scripted backends: a request goes to the model it names (the
// body's `model`, the query string's, Roboflow's model_id, DeepStack's custom/{model}; default the first); an
// unknown name is a 404 naming the models served, in each API's shape; a model that failed is reported by id
// while the others serve, and /ready follows minReady; a swap answers requests already on the old model from it
// and new ones from the new one, then closes the old backend; a removed model's requests are 404;
// POST /admin/reload takes only its own keys.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ApiKeys } from '../../src/http/auth.ts';
import { modelIdentityOf } from '../../src/http/model-identity.ts';
import { failedBackend } from '../../src/sidecar/failed-backend.ts';
import { FakeBackend, goldens, postJson, start, waitFor } from './helpers.ts';

const png = () => goldens()[0]!.png.toString('base64');

function three() {
  const a = new FakeBackend();
  const nano = new FakeBackend();
  nano.info = { ...nano.info!, variant: 'nano', inputShape: [3, 384, 384] };
  const b = new FakeBackend();
  return { a, nano, b, models: [{ backend: a }, { id: 'nano', backend: nano, model: modelIdentityOf('nano', null) }, { id: 'base-b', backend: b }] };
}

test('several models: each request runs on the model it names, in every form; the first is the default', async () => {
  const { a, nano, b, models } = three();
  const s = await start({ models });
  try {
    const calls = () => [a.calls, nano.calls, b.calls];
    assert.equal((await postJson(s.url, { image: png() })).status, 200);
    assert.deepEqual(calls(), [1, 0, 0], 'no model: the first');
    const r = await postJson(s.url, { image: png(), model: 'nano' });
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.json.input_size, [384, 384], 'the nano model\'s input size');
    assert.deepEqual(calls(), [1, 1, 0], 'JSON field');
    assert.equal((await postJson(`${s.url}`, { image: png(), model: 'rf-detr-base' })).status, 200);
    assert.deepEqual(calls(), [2, 1, 0], 'the first model\'s alias');
    const form = new FormData();
    form.append('image', new Blob([new Uint8Array(goldens()[0]!.png)], { type: 'image/png' }), 'x.png');
    form.append('model', 'base-b');
    assert.equal((await fetch(`${s.url}/predict`, { method: 'POST', body: form })).status, 200);
    assert.deepEqual(calls(), [2, 1, 1], 'multipart field');
    const raw = await fetch(`${s.url}/predict?model=nano`, { method: 'POST', headers: { 'content-type': 'image/png' }, body: new Uint8Array(goldens()[0]!.png) });
    assert.equal(raw.status, 200, await raw.text());
    assert.deepEqual(calls(), [2, 2, 1], 'query string');
    const rf = await fetch(`${s.url}/infer/object_detection`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model_id: 'base-b', image: { type: 'base64', value: png() } }) });
    assert.equal(rf.status, 200, await rf.text());
    assert.deepEqual(calls(), [2, 2, 2], 'Roboflow model_id');
    const ds = new FormData();
    ds.append('image', new Blob([new Uint8Array(goldens()[0]!.png)], { type: 'image/png' }), 'x.png');
    assert.equal((await fetch(`${s.url}/v1/vision/custom/nano`, { method: 'POST', body: ds })).status, 200);
    assert.deepEqual(calls(), [2, 3, 2], 'DeepStack custom/{model}');
    const list: any = await (await fetch(`${s.url}/v1/models`)).json();
    assert.deepEqual(list.data.map((m: any) => [m.id, m.task, m.input_size, m.state]), [
      ['Roboflow/rf-detr-base', 'object-detection', [560, 560], 'ready'], ['nano', 'object-detection', [384, 384], 'ready'], ['base-b', 'object-detection', [560, 560], 'ready']]);
    const reg: any = await (await fetch(`${s.url}/model/registry`)).json();
    assert.deepEqual(reg.models.map((m: any) => m.model_id), ['Roboflow/rf-detr-base', 'rf-detr-base', 'nano', 'base-b']);
    const metrics = await (await fetch(`${s.url}/metrics`)).text();
    assert.match(metrics, /rfdetr_model_forwards_total\{model="nano"\} 3\b/);
    assert.match(metrics, /rfdetr_model_state\{model="base-b",state="ready"\} 1\b/);
  } finally {
    await s.stop();
  }
});

test('several models: an unknown model is a 404 naming the models served, in /predict\'s, Roboflow\'s and DeepStack\'s shapes, before any forward', async () => {
  const { a, nano, b, models } = three();
  const s = await start({ models });
  try {
    const names = /this server serves Roboflow\/rf-detr-base \(or rf-detr-base\), nano, base-b/;
    const p = await postJson(s.url, { image: png(), model: 'large' });
    assert.equal(p.status, 404);
    assert.equal(p.json.code, 'E_MODEL_NOT_FOUND');
    assert.match(p.json.detail, names);
    const q = await fetch(`${s.url}/predict?model=large`, { method: 'POST', headers: { 'content-type': 'image/png' }, body: new Uint8Array(goldens()[0]!.png) });
    assert.equal(q.status, 404);
    assert.match(((await q.json()) as any).detail, names);
    const rf = await fetch(`${s.url}/infer/object_detection`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model_id: 'large', image: { type: 'base64', value: png() } }) });
    assert.equal(rf.status, 404);
    assert.match(((await rf.json()) as any).message, names);
    const ds = new FormData();
    ds.append('image', new Blob([new Uint8Array(goldens()[0]!.png)], { type: 'image/png' }), 'x.png');
    const d = await fetch(`${s.url}/v1/vision/custom/large`, { method: 'POST', body: ds });
    assert.equal(d.status, 404);
    const db: any = await d.json();
    assert.equal(db.success, false);
    assert.match(db.error, names);
    assert.deepEqual([a.calls, nano.calls, b.calls], [0, 0, 0]);
  } finally {
    await s.stop();
  }
});

test('several models: a model that failed is reported by id while the others serve; /ready needs minReady of them', async () => {
  for (const minReady of [undefined, 1] as const) {
    const a = new FakeBackend();
    const s = await start({ models: [{ backend: a }, { id: 'broken', backend: failedBackend('no model.safetensors in /nowhere') }], ...(minReady ? { minReady } : {}) });
    try {
      const ready = await fetch(`${s.url}/ready`);
      if (minReady === undefined) {
        assert.equal(ready.status, 503, 'default: every model must be ready');
        assert.match(((await ready.json()) as any).detail, /1 of 2 models are ready and 2 must be .*broken \(failed: no model\.safetensors in \/nowhere\)/);
      } else assert.equal(ready.status, 200, await ready.text());
      const health: any = await (await fetch(`${s.url}/health`)).json();
      assert.deepEqual(health.models.map((m: any) => [m.id, m.state, m.failure]), [['Roboflow/rf-detr-base', 'ready', null], ['broken', 'failed', 'no model.safetensors in /nowhere']]);
      assert.equal(health.status, minReady === undefined ? 'starting' : 'ok');
      assert.equal((await postJson(s.url, { image: png() })).status, 200, 'the other model serves');
      const r = await postJson(s.url, { image: png(), model: 'broken' });
      assert.equal(r.status, 503);
      assert.match(r.json.detail, /no model\.safetensors in \/nowhere/);
    } finally {
      await s.stop();
    }
  }
});

test('several models: a swap answers requests already on the old model from it, new ones from the new model, then closes the old one', async () => {
  const { a, nano, b, models } = three();
  const s = await start({ models });
  try {
    const release = b.block();
    const inFlight = postJson(s.url, { image: png(), model: 'base-b' });
    await waitFor(() => b.inFlight === 1, 'the request on the old base-b');
    const b2 = new FakeBackend();
    b2.state = 'starting';
    let swapped = false;
    const put = s.srv.models.put({ id: 'base-b', backend: b2 }, async (x) => {
      await waitFor(() => x.state === 'ready', 'the new backend ready');
    }).then((r) => ((swapped = true), r));
    // Not ready: base-b's new requests still go to the old backend (they queue behind the blocked one).
    assert.equal(s.srv.models.resolve('base-b').backend, b);
    b2.state = 'ready';
    await waitFor(() => s.srv.models.resolve('base-b').backend === b2, 'the switch');
    const after = await postJson(s.url, { image: png(), model: 'base-b' });
    assert.equal(after.status, 200);
    assert.equal(b2.calls, 1, 'a new request runs on the new backend');
    assert.equal(swapped, false, 'the old one is still draining');
    assert.equal(b.closed, 0);
    release();
    assert.equal((await inFlight).status, 200, 'the request on the old backend is answered');
    const r = await put;
    assert.equal(r.outcome, 'swapped');
    assert.equal(b.closed, 1, 'the old backend is closed once drained');
    assert.equal(b.calls, 1);
    assert.deepEqual([a.calls, nano.calls], [0, 0]);
  } finally {
    await s.stop();
  }
});

test('several models: one fair share across every model\'s queue, a swapped-in lane included', async () => {
  const { models } = three();
  const s = await start({ models });
  try {
    const lane = (id: string) => s.srv.models.resolve(id).engine;
    lane('nano').charge('x', 250);
    assert.deepEqual(['rf-detr-base', 'nano', 'base-b'].map((id) => lane(id).engineTimeOf('x')), [250, 250, 250], 'x\'s time on nano counts on every model');
    await s.srv.models.put({ id: 'base-b', backend: new FakeBackend() }, async () => {});
    assert.equal(lane('base-b').engineTimeOf('x'), 250, 'the new base-b lane joins the same clock');
    lane('base-b').charge('x', 50);
    assert.equal(lane('nano').engineTimeOf('x'), 300);
  } finally {
    await s.stop();
  }
});

test('several models: a swap whose backend fails before it is ready keeps the old model serving', async () => {
  const { b, models } = three();
  const s = await start({ models });
  try {
    const bad = new FakeBackend();
    bad.state = 'starting';
    const put = s.srv.models.put({ id: 'base-b', backend: bad }, () => Promise.reject(new Error('sidecar exited 1')));
    await assert.rejects(put, /sidecar exited 1/);
    assert.ok(bad.destroyed, 'the failed backend is destroyed');
    assert.equal(s.srv.models.resolve('base-b').backend, b);
    assert.equal((await postJson(s.url, { image: png(), model: 'base-b' })).status, 200);
  } finally {
    await s.stop();
  }
});

test('several models: a removed model\'s requests are 404 naming the models still served; its backend is closed', async () => {
  const { b, models } = three();
  const s = await start({ models });
  try {
    await s.srv.models.remove('base-b');
    assert.equal(b.closed, 1);
    const r = await postJson(s.url, { image: png(), model: 'base-b' });
    assert.equal(r.status, 404);
    assert.match(r.json.detail, /model "base-b" is not served here: this server serves Roboflow\/rf-detr-base \(or rf-detr-base\), nano;/);
    const metrics = await (await fetch(`${s.url}/metrics`)).text();
    assert.doesNotMatch(metrics, /rfdetr_model_state\{model="base-b"/, 'its series are gone');
  } finally {
    await s.stop();
  }
});

test('POST /admin/reload: off by default (404); on, only an admin key (not an API key) runs the reload', async () => {
  const off = await start();
  try {
    assert.equal((await fetch(`${off.url}/admin/reload`, { method: 'POST' })).status, 404);
  } finally {
    await off.stop();
  }
  let reloads = 0;
  const s = await start({
    apiKeys: new ApiKeys(['api-key-1']),
    admin: { keys: new ApiKeys(['admin-key-1']), reload: async () => ({ models: [], n: ++reloads }) },
  });
  try {
    const post = (key?: string) => fetch(`${s.url}/admin/reload`, { method: 'POST', headers: key ? { authorization: `Bearer ${key}` } : {} });
    assert.equal((await post()).status, 401);
    const wrong = await post('api-key-1');
    assert.equal(wrong.status, 401);
    assert.match(((await wrong.json()) as any).detail, /an API key is not an admin key/);
    const ok = await post('admin-key-1');
    assert.equal(ok.status, 200);
    assert.deepEqual(await ok.json(), { models: [], n: 1 });
    assert.equal(reloads, 1);
  } finally {
    await s.stop();
  }
});

test('several models: POST /predict/video runs every frame on the model its `model` field or query names; an unknown one is 404', async () => {
  const { a, nano, b, models } = three();
  const openVideo = async () => ({
    info: { width: 64, height: 48, fps: 10, rotation: 0, hasAudio: false, codec: 'scripted', container: 'scripted', frameCount: 3, durationMs: 300 },
    fps: 10,
    frames: 3,
    async *[Symbol.asyncIterator]() {
      for (let i = 0; i < 3; i++) yield { index: i, ptsMs: i * 100, width: 64, height: 48, rgb: Buffer.alloc(64 * 48 * 3, 7) };
    },
    async close() {},
  });
  const s = await start({ models, openVideo });
  try {
    const post = (q: string) => fetch(`${s.url}/predict/video${q}`, { method: 'POST', headers: { 'content-type': 'video/mp4' }, body: new Uint8Array(Buffer.from('scripted')) });
    const r = await post('?model=nano');
    assert.equal(r.status, 200, await r.clone().text());
    const lines = (await r.text()).trim().split('\n').map((l) => JSON.parse(l));
    assert.equal(lines.at(-1).summary.frames, 3);
    assert.deepEqual([a.calls, nano.calls, b.calls], [0, 3, 0]);
    const form = new FormData();
    form.append('model', 'base-b');
    form.append('video', new Blob([new Uint8Array(Buffer.from('scripted'))], { type: 'video/mp4' }), 'v.mp4');
    const m = await fetch(`${s.url}/predict/video`, { method: 'POST', body: form });
    assert.equal(m.status, 200, await m.clone().text());
    await m.text();
    assert.deepEqual([a.calls, nano.calls, b.calls], [0, 3, 3], 'the multipart field');
    const u = await post('?model=large');
    assert.equal(u.status, 404);
    assert.match(((await u.json()) as any).detail, /this server serves Roboflow\/rf-detr-base \(or rf-detr-base\), nano, base-b/);
  } finally {
    await s.stop();
  }
});
