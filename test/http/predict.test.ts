// /predict end to end over real HTTP with a scripted backend: the three body forms, defaults and bounds, the
// response shape, and the fixture images' detections (decode + preprocess + postprocess + HTTP) against
// detections.json. The fake backend returns a case's golden outputs only if the pixel_values it receives
// match that case's golden pixel_values (≤ 1e-5), so the preprocessing is checked on the way.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import sharp from 'sharp';
import { FakeBackend, cocoLabels, goldenResponder, goldens, postJson, start, u8, type Started } from './helpers.ts';

let s: Started;
before(async () => {
  s = await start();
  s.backend.respond = goldenResponder;
});
after(() => s.stop());

const b64 = (b: Buffer) => b.toString('base64');

function assertMatchesFixture(body: any, caseName: string, thr: '0.5' | '0.3', max = 300) {
  const g = goldens().find((x) => x.name === caseName)!;
  const want = g.detections[thr]!.slice(0, max);
  assert.equal(body.num_detections, want.length, `${caseName}@${thr}: detection count`);
  assert.equal(body.detections.length, want.length);
  assert.deepEqual(body.image_size, { width: g.width, height: g.height });
  assert.deepEqual(body.input_size, [560, 560]);
  for (let i = 0; i < want.length; i++) {
    const got = body.detections[i];
    const w = want[i]!;
    assert.equal(got.label_id, w.label, `${caseName} #${i} label_id`);
    assert.equal(got.label, w.label_name, `${caseName} #${i} label`);
    // Exact: the JSON carries the f32 values unrounded, and src/detect reproduces the reference bit for bit.
    assert.equal(got.score, w.score, `${caseName} #${i} score`);
    assert.deepEqual(got.box, w.box_xyxy, `${caseName} #${i} box`);
    // box_cxcywh_norm is the model's raw box for that query.
    const q = w.query;
    assert.deepEqual(got.box_cxcywh_norm, Array.from(g.predBoxes.subarray(q * 4, q * 4 + 4)));
  }
}

describe('fixture detections equal detections.json', () => {
  for (const name of ['case-1', 'case-2', 'case-3']) {
    test(`${name}: JSON base64, default threshold 0.5`, async () => {
      const g = goldens().find((x) => x.name === name)!;
      const r = await postJson(s.url, { image: b64(g.png) });
      assert.equal(r.status, 200, r.text);
      assertMatchesFixture(r.json, name, '0.5');
      assert.equal(r.json.threshold, 0.5);
      assert.equal(r.json.raw, undefined);
    });
  }

  test('case-2 at threshold 0.3 via multipart/form-data', async () => {
    const g = goldens()[1]!;
    const fd = new FormData();
    fd.append('image', new Blob([u8(g.png)], { type: 'image/png' }), 'input.png');
    fd.append('threshold', '0.3');
    fd.append('max_detections', '300');
    const res = await fetch(`${s.url}/predict`, { method: 'POST', body: fd });
    const body: any = await res.json();
    assert.equal(res.status, 200, JSON.stringify(body));
    assertMatchesFixture(body, 'case-2', '0.3');
    assert.equal(body.threshold, 0.3);
  });

  test('case-3 as a raw image/png body with query parameters, max_detections caps the sorted list', async () => {
    const g = goldens()[2]!;
    const res = await fetch(`${s.url}/predict?threshold=0.3&max_detections=7`, { method: 'POST', headers: { 'content-type': 'image/png' }, body: u8(g.png) });
    const body: any = await res.json();
    assert.equal(res.status, 200, JSON.stringify(body));
    assertMatchesFixture(body, 'case-3', '0.3', 7);
    assert.equal(body.num_detections, 7);
  });

  test('a data: URL with line-wrapped base64 decodes to the same detections', async () => {
    const g = goldens()[0]!;
    const wrapped = b64(g.png).replace(/(.{76})/g, '$1\r\n');
    const r = await postJson(s.url, { image: `data:image/png;base64,${wrapped}` });
    assert.equal(r.status, 200, r.text);
    assertMatchesFixture(r.json, 'case-1', '0.5');
  });
});

describe('response shape', () => {
  test('return_raw adds raw.logits [300][91] and raw.pred_boxes [300][4], unrounded', async () => {
    const g = goldens()[0]!;
    const r = await postJson(s.url, { image: b64(g.png), return_raw: true, max_detections: 1 });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.raw.logits.length, 300);
    assert.ok(r.json.raw.logits.every((row: number[]) => row.length === 91));
    assert.equal(r.json.raw.pred_boxes.length, 300);
    assert.ok(r.json.raw.pred_boxes.every((row: number[]) => row.length === 4));
    // Full f32 precision survives: every value equals the golden f32 exactly.
    for (const q of [0, 17, 299]) {
      assert.deepEqual(r.json.raw.logits[q], Array.from(g.logits.subarray(q * 91, q * 91 + 91)));
      assert.deepEqual(r.json.raw.pred_boxes[q], Array.from(g.predBoxes.subarray(q * 4, q * 4 + 4)));
    }
    assert.equal(r.json.num_detections, 1);
  });

  test('timing_ms has all seven stages, non-negative; inference is the backend forward_ms', async (t) => {
    // The sidecar's reported work (its 0.5 ms resize and 30 ms forward) passes on the server's clock:
    // performance.now() jumps by that much inside the backend's call.
    const realNow = performance.now.bind(performance);
    let skew = 0;
    t.mock.method(performance, 'now', () => realNow() + skew);
    s.backend.forwardMs = 30;
    const respond = s.backend.respond;
    s.backend.respond = (input) => {
      skew += s.backend.preprocessMs + s.backend.forwardMs;
      return respond(input);
    };
    try {
      const g = goldens()[0]!;
      const r = await postJson(s.url, { image: b64(g.png) });
      assert.equal(r.status, 200);
      assert.equal(r.headers.get('content-type'), 'application/json; charset=utf-8');
      assert.equal(r.headers.get('content-length'), String(Buffer.byteLength(r.text)));
      const t = r.json.timing_ms;
      assert.deepEqual(Object.keys(t).sort(), ['decode', 'inference', 'postprocess', 'preprocess', 'queue', 'total', 'transfer']);
      for (const k of Object.keys(t)) assert.ok(typeof t[k] === 'number' && t[k] >= 0, `${k}=${t[k]}`);
      assert.equal(t.inference, 30);
      assert.equal(t.transfer, 0.25);
      assert.ok(t.total >= t.decode + t.preprocess + t.postprocess, 'total covers the stages');
      assert.ok(t.total >= 30, `total ${t.total} includes the 30 ms forward`);
      // Server-Timing: the timeline's stages in order, consecutive, so they add up to its total; the sidecar's
      // own figures are timing_ms's; gc and loop-delay overlap the stages and come after the total.
      const entries = r.headers.get('server-timing')!.split(', ').map((e) => {
        const m = /^([a-z-]+);dur=([0-9.]+)(;desc=".*")?$/.exec(e);
        assert.ok(m, `Server-Timing entry ${e}`);
        return [m[1]!, Number(m[2])] as const;
      });
      const names = entries.map(([n]) => n);
      assert.deepEqual(names, ['wait-body', 'receive', 'parse', 'decode-wait', 'decode-header', 'pixel-wait', 'decode', 'admit', 'engine-wait',
        'send', 'preprocess', 'inference', 'sidecar-io', 'reply', 'postprocess', 'serialise', 'total', 'gc', 'loop-delay']);
      const dur = Object.fromEntries(entries);
      // The backend's reported 30 ms: its round trip took at least that long, so nothing was clamped.
      assert.equal(dur.inference, 30);
      assert.equal(dur.preprocess, Math.round(t.preprocess * 1000) / 1000);
      assert.ok(Math.abs(dur.decode! + dur['decode-header']! - t.decode) < 0.002, `decode-header + decode = timing_ms.decode (${t.decode})`);
      const sum = entries.slice(0, names.indexOf('total')).reduce((n, [, ms]) => n + ms, 0);
      assert.ok(Math.abs(sum - dur.total!) < 0.02, `stages sum to ${sum}, total ${dur.total}`);
      assert.ok(dur.total! >= t.total - 0.01, `the timeline (${dur.total}) covers timing_ms.total (${t.total}) and the serialisation`);
    } finally {
      s.backend.forwardMs = 0;
      s.backend.respond = respond;
    }
  });

  test('boxes are clamped to the image; detections sorted by score descending', async () => {
    const g = goldens()[0]!;
    const r = await postJson(s.url, { image: b64(g.png), threshold: 0 });
    assert.equal(r.status, 200);
    assert.equal(r.json.num_detections, 100, 'default max_detections is 100');
    for (const d of r.json.detections) {
      assert.ok(d.box[0] >= 0 && d.box[2] <= g.width && d.box[1] >= 0 && d.box[3] <= g.height, JSON.stringify(d.box));
    }
    for (let i = 1; i < r.json.detections.length; i++) assert.ok(r.json.detections[i - 1].score >= r.json.detections[i].score);
  });

  test('the image is the original size: a 64×48 JPEG reports image_size 64×48', async () => {
    const jpg = await sharp({ create: { width: 64, height: 48, channels: 3, background: '#808080' } }).jpeg().toBuffer();
    s.backend.respond = () => ({ logits: goldens()[0]!.logits, predBoxes: goldens()[0]!.predBoxes });
    try {
      const r = await postJson(s.url, { image: b64(jpg) });
      assert.equal(r.status, 200, r.text);
      assert.deepEqual(r.json.image_size, { width: 64, height: 48 });
      for (const d of r.json.detections) assert.ok(d.box[2] <= 64 && d.box[3] <= 48);
    } finally {
      s.backend.respond = goldenResponder;
    }
  });
});

describe('the answer\'s bytes', () => {
  test('an all-ASCII answer is JSON.stringify\'s text, and one with non-ASCII labels is UTF-8 with its byte length', async () => {
    const g = goldens()[0]!;
    const ascii = await postJson(s.url, { image: b64(g.png) });
    assert.equal(ascii.status, 200);
    assert.equal(ascii.text, JSON.stringify(ascii.json));
    assert.equal(ascii.headers.get('content-length'), String(ascii.text.length));
    // Every class renamed with characters outside ASCII (2-, 3- and 4-byte UTF-8).
    const labels = cocoLabels().map((l, i) => `${l} é–${i % 2 ? '🐈' : 'ß'}`);
    const other = await start({ backend: new FakeBackend(labels) });
    try {
      const res = await fetch(`${other.url}/predict`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ image: b64(g.png) }) });
      const bytes = Buffer.from(await res.arrayBuffer());
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('content-length'), String(bytes.length));
      const body = JSON.parse(bytes.toString('utf8'));
      assert.ok(body.detections.length > 0);
      for (const d of body.detections) assert.equal(d.label, labels[d.label_id]);
      assert.deepEqual(bytes, Buffer.from(JSON.stringify(body), 'utf8'));
    } finally {
      await other.stop();
    }
  });
});
