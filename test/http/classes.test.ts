// `classes` on /predict: ids or label names (case-insensitive), in all three body forms, applied before
// max_detections; an unknown class is a 422 naming it.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { goldens, postJson, start, u8, type Started } from './helpers.ts';

let s: Started;
let png: string;
before(async () => {
  s = await start();
  png = goldens()[0]!.png.toString('base64');
});
after(() => s.stop());

/** The fixture's detections at threshold 0.5 whose class is in `ids`, in score order. */
function expected(ids: number[]) {
  return goldens()[0]!.detections['0.5']!.filter((d) => ids.includes(d.label));
}

test('classes by name and by id keep only those classes, in score order', async () => {
  const want = expected([52, 5]);
  assert.ok(want.length >= 2, 'the fixture has bananas and airplanes');
  const r = await postJson(s.url, { image: png, classes: ['Banana', 5] });
  assert.equal(r.status, 200, r.text);
  assert.deepEqual(r.json.detections.map((d: any) => d.label_id), want.map((d) => d.label));
  assert.equal(r.json.num_detections, want.length);
});

test('the filter applies before max_detections: the best N of the asked classes', async () => {
  const r = await postJson(s.url, { image: png, classes: ['airplane'], max_detections: 1 });
  assert.equal(r.status, 200, r.text);
  assert.deepEqual(r.json.detections.map((d: any) => d.score), [expected([5])[0]!.score]);
});

test('multipart and query strings take a comma-separated list', async () => {
  const want = expected([52, 5]).map((d) => d.label);
  const fd = new FormData();
  fd.append('image', new Blob([u8(goldens()[0]!.png)]), 'x.png');
  fd.append('classes', 'banana, 5');
  const mp = await fetch(`${s.url}/predict`, { method: 'POST', body: fd });
  assert.equal(mp.status, 200);
  assert.deepEqual(((await mp.json()) as any).detections.map((d: any) => d.label_id), want);
  const raw = await fetch(`${s.url}/predict?classes=5,banana`, { method: 'POST', headers: { 'content-type': 'image/png' }, body: u8(goldens()[0]!.png) });
  assert.equal(raw.status, 200);
  assert.deepEqual(((await raw.json()) as any).detections.map((d: any) => d.label_id), want);
});

test('an unknown class, an id past the labels, an empty list or a wrong type → 422 naming the item', async () => {
  const calls = s.backend.calls;
  const r = await postJson(s.url, { image: png, classes: ['cat', 'dgo'] });
  assert.equal(r.status, 422);
  assert.equal(r.json.field, 'classes[1]');
  assert.match(r.json.detail, /Expected a class id 0\.\.90 or a label name of this model \(person, bicycle, .*\) for classes\[1\] but received "dgo" of type string/);
  const big = await postJson(s.url, { image: png, classes: [91] });
  assert.match(big.json.detail, /for classes\[0\] but received 91 of type number/);
  const empty = await postJson(s.url, { image: png, classes: [] });
  assert.equal(empty.status, 422);
  assert.match(empty.json.detail, /Expected a non-empty array of class ids or label names .* for classes but received an array of length 0/);
  const str = await postJson(s.url, { image: png, classes: 'cat' });
  assert.match(str.json.detail, /for classes but received "cat" of type string/);
  const neg = await postJson(s.url, { image: png, classes: [-1] });
  assert.match(neg.json.detail, /Expected a class id \(integer >= 0\) or a label name for classes\[0\] but received -1 of type number/);
  const q = await fetch(`${s.url}/predict?classes=,`, { method: 'POST', headers: { 'content-type': 'image/png' }, body: u8(goldens()[0]!.png) });
  assert.match(((await q.json()) as any).detail, /Expected class ids or label names separated by commas .* for classes but received "," of type string/);
  assert.equal(s.backend.calls, calls, 'no rejected request reaches the engine');
});
