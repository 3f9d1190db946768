// Roboflow Inference's routes (src/http/compat-roboflow.ts) as inference-sdk 1.8.3 calls them: the registry, the
// answer equal to /predict's for the same image, the error shape and statuses, the api_key field, and the
// admission they share with /predict. The real client runs against a real server in scripts/compat-clients.sh.
import { test } from 'node:test';
import zlib from 'node:zlib';
import assert from 'node:assert/strict';
import { ApiKeys } from '../../src/http/auth.ts';
import { modelIdentityOf } from '../../src/http/model-identity.ts';
import { cocoLabels, FakeBackend, fixedResponder, goldens, postJson, start, waitFor } from './helpers.ts';
import { testSidecarInfo } from '../helpers/sidecar-info.ts';

const png = () => goldens()[0]!.png.toString('base64');
const ID = 'Roboflow/rf-detr-base';

async function call(url: string, path: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: typeof body === 'string' ? body : JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, headers: res.headers, json: JSON.parse(text) as any, text };
}

function segmentBackend(): FakeBackend {
  const b = new FakeBackend();
  b.info = testSidecarInfo({
    protocolVersion: 4, sidecarVersion: 'fake-0', engine: 'fake', device: 'fake device (test)', inputShape: [3, 560, 560],
    numQueries: 300, numClasses: 91, labels: cocoLabels(), variant: 'seg-nano', task: 'segment',
  });
  // A disc of mask logits > 0 around the middle: one polygon per detection, smaller than the image.
  b.respond = () => ({ ...fixedResponder(), maskOf: () => Float32Array.from({ length: 140 * 140 }, (_, i) => (Math.hypot((i % 140) - 70, Math.floor(i / 140) - 70) < 30 ? 1 : -1)) });
  return b;
}

test('roboflow: the registry lists the served model under its id and its variant name, with task and input size', async () => {
  const s = await start();
  try {
    const r = await fetch(`${s.url}/model/registry?api_key=None`);
    assert.equal(r.status, 200);
    assert.deepEqual(await r.json(), { models: [
      { model_id: ID, task_type: 'object-detection', batch_size: 1, input_height: 560, input_width: 560 },
      { model_id: 'rf-detr-base', task_type: 'object-detection', batch_size: 1, input_height: 560, input_width: 560 },
    ] });
    const added = await call(s.url, '/model/add', { model_id: 'rf-detr-base', api_key: null });
    assert.equal(added.status, 200, added.text);
    assert.equal(added.json.models.length, 2);
  } finally {
    await s.stop();
  }
});

test('roboflow: /infer/object_detection answers /predict\'s detections in Roboflow\'s shape (centre boxes, class, class_id)', async () => {
  const s = await start();
  try {
    const ours = await postJson(s.url, { image: png(), threshold: 0.4, max_detections: 300 });
    assert.equal(ours.status, 200, ours.text);
    // No confidence and no max_detections: Roboflow's defaults (0.4, 300), as the client sends neither.
    const rf = await call(s.url, '/infer/object_detection', { model_id: ID, image: { type: 'base64', value: png() }, api_key: null, disable_active_learning: false, iou_threshold: 0.5, source: 'x' });
    assert.equal(rf.status, 200, rf.text);
    assert.deepEqual(rf.json.image, ours.json.image_size);
    assert.ok(rf.json.predictions.length > 0, 'the fixture has detections');
    assert.equal(rf.json.predictions.length, ours.json.detections.length);
    rf.json.predictions.forEach((p: any, i: number) => {
      const d = ours.json.detections[i];
      assert.deepEqual([p.x - p.width / 2, p.y - p.height / 2, p.x + p.width / 2, p.y + p.height / 2].map((v) => +v.toFixed(9)), d.box.map((v: number) => +v.toFixed(9)));
      assert.equal(p.confidence, d.score);
      assert.equal(p.class, d.label);
      assert.equal(p.class_id, d.label_id);
      assert.match(p.detection_id, /^[0-9a-f-]{36}$/);
      assert.equal(p.points, undefined);
    });
    assert.equal(typeof rf.json.time, 'number');
    // confidence and class_filter map onto threshold and classes.
    const few = await call(s.url, '/infer/object_detection', { model_id: 'rf-detr-base', image: { type: 'base64', value: png() }, confidence: 0.9, class_filter: ['cat'] });
    const fewOurs = await postJson(s.url, { image: png(), threshold: 0.9, classes: ['cat'], max_detections: 300 });
    assert.deepEqual(few.json.predictions.map((p: any) => [p.class, p.confidence]), fewOurs.json.detections.map((d: any) => [d.label, d.score]));
    // A gzip body is read as /predict's is: inflated with its size capped and counted in the memory budget.
    const gz = await fetch(`${s.url}/infer/object_detection`, { method: 'POST', headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' }, body: new Uint8Array(zlib.gzipSync(JSON.stringify({ model_id: ID, image: { type: 'base64', value: png() } }))) });
    assert.equal(gz.status, 200);
    assert.deepEqual(((await gz.json()) as any).predictions.map((p: any) => p.confidence), rf.json.predictions.map((p: any) => p.confidence));
  } finally {
    await s.stop();
  }
});

test('roboflow: /infer/instance_segmentation gives each detection its largest mask polygon as points', async () => {
  const s = await start({ backend: segmentBackend(), model: modelIdentityOf('seg-nano', null) });
  try {
    const reg = await (await fetch(`${s.url}/model/registry`)).json() as any;
    assert.deepEqual(reg.models.map((m: any) => [m.model_id, m.task_type]), [['rf-detr-seg-nano', 'instance-segmentation']]);
    const ours = await postJson(s.url, { image: png(), threshold: 0.4, max_detections: 300, mask_format: 'polygon' });
    const rf = await call(s.url, '/infer/instance_segmentation', { model_id: 'rf-detr-seg-nano', image: { type: 'base64', value: png() } });
    assert.equal(rf.status, 200, rf.text);
    assert.ok(rf.json.predictions.length > 0);
    rf.json.predictions.forEach((p: any, i: number) => {
      const polygon: number[] = ours.json.detections[i].mask[0];
      assert.ok(p.points.length >= 3);
      assert.deepEqual(p.points.flatMap((q: any) => [q.x, q.y]), polygon);
    });
  } finally {
    await s.stop();
  }
});

test('roboflow: bad requests get Roboflow\'s error shape ({message}) and their status, never a 500', async () => {
  const s = await start();
  try {
    const img = { type: 'base64', value: png() };
    const cases: Array<[unknown, number, string, RegExp]> = [
      [{ model_id: 'coco/36', image: img }, 404, 'E_MODEL_NOT_FOUND', /"coco\/36" is not served here: this server serves Roboflow\/rf-detr-base \(or rf-detr-base\)/],
      [{ model_id: ID, image: { type: 'url', value: 'http://example.com/a.jpg' } }, 403, 'E_URL_NOT_ALLOWED', /fetches no URLs/],
      [{ model_id: ID, image: { type: 'numpy', value: 'gASV' } }, 422, 'E_SCHEMA', /image\.type/],
      [{ model_id: ID, image: [img, img] }, 422, 'E_SCHEMA', /one image object per request/],
      [{ model_id: ID }, 422, 'E_SCHEMA', /for image/],
      [{ image: img }, 422, 'E_SCHEMA', /for model_id/],
      [{ model_id: ID, image: img, confidence: 2 }, 422, 'E_SCHEMA', /for confidence but received 2/],
      [{ model_id: ID, image: img, class_filter: 'cat' }, 422, 'E_SCHEMA', /class_filter/],
      [{ model_id: ID, image: img, class_filter: ['cat', 'unicorn'] }, 422, 'E_SCHEMA', /for class_filter\[1\] but received "unicorn"/],
      [{ model_id: ID, image: { type: 'base64', value: 'not base64!' } }, 400, 'E_IMAGE_UNDECODABLE', /not valid base64/],
      ['{"model_id": ', 422, 'E_SCHEMA', /not valid JSON/],
    ];
    for (const [body, status, code, message] of cases) {
      const r = await call(s.url, '/infer/object_detection', body);
      assert.equal(r.status, status, `${JSON.stringify(body).slice(0, 80)}: ${r.text}`);
      assert.equal(r.json.error_type, code);
      assert.match(r.json.message, message);
      // FastAPI's validation list on a 422 (Roboflow's server's own), else not /predict's `detail`.
      if (status === 422) assert.equal(r.json.detail[0].msg, r.json.message);
      else assert.equal(r.json.detail, undefined, 'not /predict\'s shape');
    }
    const form = new FormData();
    form.append('model_id', ID);
    const multipart = await fetch(`${s.url}/infer/object_detection`, { method: 'POST', body: form });
    assert.equal(multipart.status, 415);
    assert.match(((await multipart.json()) as any).message, /Expected Content-Type application\/json for \/infer\/object_detection/);
    const unicorn = await call(s.url, '/infer/object_detection', { model_id: ID, image: img, class_filter: ['cat', 'unicorn'] });
    assert.deepEqual(unicorn.json.detail[0].loc, ['body', 'class_filter', 1]);
    const seg = await call(s.url, '/infer/instance_segmentation', { model_id: ID, image: img });
    assert.equal(seg.status, 400);
    assert.match(seg.json.message, /object-detection model, which has no masks: post it to \/infer\/object_detection/);
    const add = await call(s.url, '/model/add', { model_id: 'coco/36' });
    assert.equal(add.status, 404);
    assert.match(add.json.message, /not served here/);
  } finally {
    await s.stop();
  }
});

test('roboflow: api_key in the body or the query string is checked against the server\'s keys', async () => {
  const KEY = 'rf-test-key-0001';
  const s = await start({ apiKeys: new ApiKeys([KEY]) });
  try {
    const body = { model_id: ID, image: { type: 'base64', value: png() } };
    const none = await call(s.url, '/infer/object_detection', body);
    assert.equal(none.status, 401);
    assert.match(none.json.message, /requires an API key: .*or as the api_key field/);
    const wrong = await call(s.url, '/infer/object_detection', { ...body, api_key: 'nope' });
    assert.equal(wrong.status, 401);
    assert.match(wrong.json.message, /not valid/);
    assert.equal((await call(s.url, '/infer/object_detection', { ...body, api_key: KEY })).status, 200);
    assert.equal((await call(s.url, '/infer/object_detection', body, { authorization: `Bearer ${KEY}` })).status, 200);
    assert.equal((await fetch(`${s.url}/model/registry?api_key=None`)).status, 401);
    assert.equal((await fetch(`${s.url}/model/registry`)).status, 401);
    assert.equal((await fetch(`${s.url}/model/registry?api_key=${KEY}`)).status, 200);
    assert.equal((await call(s.url, '/model/add', { model_id: ID })).status, 401);
    assert.equal((await call(s.url, '/model/add', { model_id: ID, api_key: KEY })).status, 200);
    // The query string's key does not open /predict: its clients use the headers.
    assert.equal((await fetch(`${s.url}/predict?api_key=${KEY}`, { method: 'POST', headers: { 'content-type': 'image/png' }, body: new Uint8Array(goldens()[0]!.png) })).status, 401);
  } finally {
    await s.stop();
  }
});

test('roboflow: the routes share /predict\'s queue: full → 503 in Roboflow\'s shape with Retry-After', async () => {
  const s = await start({ queueSize: 2, trustProxy: true });
  const release = s.backend.block();
  try {
    const held = [postJson(s.url, { image: png() }, { 'x-forwarded-for': 'a' })];
    await waitFor(() => s.backend.calls === 1, 'the first forward');
    held.push(postJson(s.url, { image: png() }, { 'x-forwarded-for': 'b' }), postJson(s.url, { image: png() }, { 'x-forwarded-for': 'c' }));
    await waitFor(() => s.srv.engine.depth === 2, 'two requests waiting for the engine');
    const full = await call(s.url, '/infer/object_detection', { model_id: ID, image: { type: 'base64', value: png() } }, { 'x-forwarded-for': 'd' });
    assert.equal(full.status, 503);
    assert.equal(full.json.error_type, 'E_QUEUE_FULL');
    assert.ok(Number(full.headers.get('retry-after')) >= 1);
    release();
    assert.deepEqual((await Promise.all(held)).map((r) => r.status), [200, 200, 200]);
  } finally {
    s.backend.release();
    await s.stop();
  }
});
