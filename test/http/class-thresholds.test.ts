// `class_thresholds` on /predict: a threshold per class by name or id, the global threshold for the others,
// before max_detections; in all three body forms; an unknown class or an out-of-range value is a 422 naming it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { goldens, postJson, serverForFile, u8 } from './helpers.ts';

const file = serverForFile();

/** The fixture's detections kept by `perClass` (class id → 0.3 or 0.5, the fixture's two thresholds) and 0.5 otherwise. */
function expected(perClass: Record<number, '0.3' | '0.5'>, global: '0.3' | '0.5' = '0.5') {
  const d = goldens()[0]!.detections;
  return d['0.3']!.filter((x) => d[perClass[x.label] ?? global]!.some((y) => y.query === x.query));
}

test('class_thresholds by name and by id: those classes at their own threshold, the others at the global one', async () => {
  const want = expected({ 52: '0.3', 5: '0.3' });
  const at05 = goldens()[0]!.detections['0.5']!.length;
  assert.ok(want.length > at05, `the fixture has bananas or airplanes between 0.3 and 0.5 (${want.length} vs ${at05})`);
  const r = await postJson(file.s.url, { image: file.png, threshold: 0.5, class_thresholds: { Banana: 0.3, '5': 0.3 }, max_detections: 300 });
  assert.equal(r.status, 200, r.text);
  assert.deepEqual(r.json.detections.map((x: any) => x.score), want.map((x) => x.score));
  assert.equal(r.json.threshold, 0.5, 'the response states the global threshold');
  // A class held above the global threshold loses its detections between the two.
  const strict = await postJson(file.s.url, { image: file.png, threshold: 0.3, class_thresholds: { banana: 0.5 }, max_detections: 300 });
  assert.deepEqual(strict.json.detections.map((x: any) => x.score), expected({ 52: '0.5' }, '0.3').map((x) => x.score));
});

test('class_thresholds apply before max_detections', async () => {
  const want = expected({ 52: '0.3', 5: '0.3' }).slice(0, 3);
  const r = await postJson(file.s.url, { image: file.png, class_thresholds: { banana: 0.3, airplane: 0.3 }, max_detections: 3 });
  assert.deepEqual(r.json.detections.map((x: any) => x.score), want.map((x) => x.score));
});

test('multipart and query strings take class:threshold pairs', async () => {
  const want = expected({ 52: '0.3' }).map((x) => x.score);
  const fd = new FormData();
  fd.append('image', new Blob([u8(goldens()[0]!.png)]), 'x.png');
  fd.append('class_thresholds', 'banana:0.3');
  fd.append('max_detections', '300');
  const mp = await fetch(`${file.s.url}/predict`, { method: 'POST', body: fd });
  assert.equal(mp.status, 200);
  assert.deepEqual(((await mp.json()) as any).detections.map((x: any) => x.score), want);
  const raw = await fetch(`${file.s.url}/predict?class_thresholds=52:0.3&max_detections=300`, { method: 'POST', headers: { 'content-type': 'image/png' }, body: u8(goldens()[0]!.png) });
  assert.equal(raw.status, 200);
  assert.deepEqual(((await raw.json()) as any).detections.map((x: any) => x.score), want);
});

test('an unknown class, a value outside 0..1, an empty object or malformed text → 422 naming it', async () => {
  const cases: Array<[unknown, RegExp]> = [
    [{ unicorn: 0.3 }, /for class_thresholds\.unicorn but received 0\.3/],
    [{ cat: 1.5 }, /Expected a number between 0 and 1 \(inclusive\) for class_thresholds\.cat but received 1\.5/],
    [{ cat: '0.3' }, /for class_thresholds\.cat but received "0\.3" of type string/],
    [{}, /for class_thresholds but received an object/],
    [[0.3], /for class_thresholds but received an array/],
  ];
  for (const [v, re] of cases) {
    const r = await postJson(file.s.url, { image: file.png, class_thresholds: v });
    assert.equal(r.status, 422, `${JSON.stringify(v)}: ${r.text}`);
    assert.match(r.json.detail, re);
  }
  const raw = await fetch(`${file.s.url}/predict?class_thresholds=cat=0.3`, { method: 'POST', headers: { 'content-type': 'image/png' }, body: u8(goldens()[0]!.png) });
  assert.equal(raw.status, 422);
  assert.match(((await raw.json()) as any).detail, /Expected class:threshold pairs .* for class_thresholds but received "cat=0\.3"/);
});
