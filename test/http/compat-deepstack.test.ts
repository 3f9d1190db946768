// DeepStack / CodeProject.AI's detection routes (src/http/compat-deepstack.ts) as deepstack-python 0.9 calls
// them (multipart image + min_confidence + api_key): the answer equal to /predict's for the same image, the
// custom model routes, the error shape and statuses, the api_key field, and the admission shared with /predict.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ApiKeys } from '../../src/http/auth.ts';
import { bodyLimitFor } from '../../src/http/body.ts';
import { MAX_IMAGE_BYTES } from '../../src/image/limits.ts';
import { goldens, postJson, rawExchange, start, waitFor } from './helpers.ts';

const image = () => goldens()[0]!.png;

async function detect(url: string, path: string, fields: Record<string, string>, file: Buffer | null = image(), headers: Record<string, string> = {}) {
  const form = new FormData();
  for (const [k, v] of Object.entries(fields)) form.append(k, v);
  if (file) form.append('image', new Blob([new Uint8Array(file)]), 'image.png');
  const res = await fetch(`${url}${path}`, { method: 'POST', body: form, headers });
  const text = await res.text();
  return { status: res.status, headers: res.headers, json: JSON.parse(text) as any, text };
}

test('deepstack: /v1/vision/detection answers /predict\'s detections as DeepStack predictions (corner boxes, whole pixels)', async () => {
  const s = await start();
  try {
    const ours = await postJson(s.url, { image: image().toString('base64'), threshold: 0.45, max_detections: 300 });
    // deepstack-python's own fields: api_key (empty by default) and min_confidence.
    const ds = await detect(s.url, '/v1/vision/detection', { api_key: '', min_confidence: '0.45' });
    assert.equal(ds.status, 200, ds.text);
    assert.equal(ds.json.success, true);
    assert.ok(ds.json.predictions.length > 0, 'the fixture has detections');
    assert.equal(ds.json.count, ours.json.detections.length);
    assert.deepEqual(ds.json.predictions, ours.json.detections.map((d: any) => ({
      label: d.label, confidence: d.score, x_min: Math.round(d.box[0]), y_min: Math.round(d.box[1]), x_max: Math.round(d.box[2]), y_max: Math.round(d.box[3]),
    })));
    // A field DeepStack does not know is ignored, as its server does (an NVR may send its own).
    const custom = await detect(s.url, '/v1/vision/custom/rf-detr-base', { min_confidence: '0.45', typedetect: 'x' });
    assert.deepEqual(custom.json.predictions, ds.json.predictions);
    // No min_confidence: DeepStack's default, 0.4.
    const dflt = await detect(s.url, '/v1/vision/detection', {});
    const ours40 = await postJson(s.url, { image: image().toString('base64'), threshold: 0.4, max_detections: 300 });
    assert.equal(dflt.json.count, ours40.json.detections.length);
    const list = await (await fetch(`${s.url}/v1/vision/custom/list`, { method: 'POST' })).json();
    assert.deepEqual(list, { success: true, models: ['rf-detr-base'] });
  } finally {
    await s.stop();
  }
});

test('deepstack: bad requests get DeepStack\'s error shape ({success: false, error}) and their status, never a 500', async () => {
  const s = await start();
  try {
    const cases: Array<[string, Record<string, string>, Buffer | null, number, string, RegExp]> = [
      ['/v1/vision/custom/coco', {}, image(), 404, 'E_MODEL_NOT_FOUND', /model "coco" is not served here: this server serves Roboflow\/rf-detr-base \(or rf-detr-base\)/],
      ['/v1/vision/detection', {}, null, 422, 'E_SCHEMA', /file part named "image"/],
      ['/v1/vision/detection', { min_confidence: 'high' }, image(), 422, 'E_SCHEMA', /for min_confidence but received/],
      ['/v1/vision/detection', { min_confidence: '1.5' }, image(), 422, 'E_SCHEMA', /min_confidence/],
      ['/v1/vision/detection', Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`f${i}`, 'x'])), image(), 422, 'E_SCHEMA', /Expected at most 16 fields \(image, min_confidence, api_key, and others ignored\)/],
      ['/v1/vision/detection', {}, Buffer.from('not an image'), 400, 'E_IMAGE_UNDECODABLE', /./],
    ];
    for (const [path, fields, file, status, code, message] of cases) {
      const r = await detect(s.url, path, fields, file);
      assert.equal(r.status, status, `${path} ${JSON.stringify(fields)}: ${r.text}`);
      assert.equal(r.json.success, false);
      assert.equal(r.json.error_type, code);
      assert.equal(r.json.code, status);
      assert.match(r.json.error, message);
    }
    const json = await fetch(`${s.url}/v1/vision/detection`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    assert.equal(json.status, 415);
    assert.equal(((await json.json()) as any).success, false);
  } finally {
    await s.stop();
  }
});

test('deepstack: the api_key form field or query parameter is checked against the server\'s keys', async () => {
  const KEY = 'ds-test-key-0001';
  const s = await start({ apiKeys: new ApiKeys([KEY]) });
  try {
    const none = await detect(s.url, '/v1/vision/detection', { api_key: '' });
    assert.equal(none.status, 401);
    assert.equal(none.json.success, false);
    assert.match(none.json.error, /requires an API key/);
    assert.equal((await detect(s.url, '/v1/vision/detection', { api_key: 'wrong' })).status, 401);
    assert.equal((await detect(s.url, '/v1/vision/detection', { api_key: KEY })).status, 200);
    assert.equal((await detect(s.url, '/v1/vision/detection', {}, image(), { 'x-api-key': KEY })).status, 200);
    assert.equal((await fetch(`${s.url}/v1/vision/custom/list`, { method: 'POST' })).status, 401);
    assert.equal((await fetch(`${s.url}/v1/vision/custom/list?api_key=${KEY}`, { method: 'POST' })).status, 200);
  } finally {
    await s.stop();
  }
});

test('deepstack: the routes share /predict\'s queue: full → 503 in DeepStack\'s shape with Retry-After', async () => {
  const s = await start({ queueSize: 2, trustProxy: true });
  const release = s.backend.block();
  try {
    const b64 = image().toString('base64');
    const held = [postJson(s.url, { image: b64 }, { 'x-forwarded-for': 'a' })];
    await waitFor(() => s.backend.calls === 1, 'the first forward');
    held.push(postJson(s.url, { image: b64 }, { 'x-forwarded-for': 'b' }), postJson(s.url, { image: b64 }, { 'x-forwarded-for': 'c' }));
    await waitFor(() => s.srv.engine.depth === 2, 'two requests waiting for the engine');
    const full = await detect(s.url, '/v1/vision/detection', {}, image(), { 'x-forwarded-for': 'd' });
    assert.equal(full.status, 503);
    assert.equal(full.json.success, false);
    assert.equal(full.json.error_type, 'E_QUEUE_FULL');
    assert.ok(Number(full.headers.get('retry-after')) >= 1);
    release();
    assert.deepEqual((await Promise.all(held)).map((r) => r.status), [200, 200, 200]);
  } finally {
    s.backend.release();
    await s.stop();
  }
});

test('deepstack: custom/{unknown model} reads and drops a large upload, then answers its 404 (not a reset mid-upload); past the body limit it answers at once', async () => {
  const s = await start();
  try {
    // 24 MiB of multipart body in 64 KiB chunks, streamed: the client is still sending when the route knows the
    // model is not served.
    const boundary = 'x-rfdetr-large';
    const chunk = new Uint8Array(64 * 1024).fill(0x41);
    const chunks = 384;
    let sent = 0;
    const body = new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(new TextEncoder().encode(`--${boundary}\r\nContent-Disposition: form-data; name="image"; filename="x.png"\r\nContent-Type: image/png\r\n\r\n`));
      },
      pull(c) {
        if (sent++ < chunks) return c.enqueue(chunk);
        c.enqueue(new TextEncoder().encode(`\r\n--${boundary}--\r\n`));
        c.close();
      },
    });
    const r = await fetch(`${s.url}/v1/vision/custom/coco`, { method: 'POST', body, duplex: 'half', headers: { 'content-type': `multipart/form-data; boundary=${boundary}` } } as RequestInit);
    assert.equal(r.status, 404);
    const json: any = await r.json();
    assert.equal(json.success, false);
    assert.match(json.error, /model "coco" is not served here/);
    assert.equal(sent, chunks + 1, 'the whole upload was taken');
    // A declared length past the body limit is not waited for: the 404 goes at once and the connection closes
    // (rawExchange resolves on the close, with no body byte sent).
    const raw = await rawExchange(s.url, Buffer.from(`POST /v1/vision/custom/coco HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=${boundary}\r\nContent-Length: ${bodyLimitFor(MAX_IMAGE_BYTES) + 1}\r\n\r\n`));
    assert.match(raw, /^HTTP\/1\.1 404 /);
    assert.match(raw, /\r\nConnection: close\r\n/i);
  } finally {
    await s.stop();
  }
});
