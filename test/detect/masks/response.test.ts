// The masks of a response (src/detect/masks/detections.ts, pipeline.ts buildPredictResponse): each kept
// segmentation detection's `mask` in the requested format, right after box_cxcywh_norm; none with
// mask_format none or on a detection model (whose detections keep exactly their keys); a segmentation
// detection without mask logits is an internal error naming it.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { detectionMasks } from '../../../src/detect/masks/detections.ts';
import { maskPolygons, maskRle } from '../../../src/detect/masks/encode.ts';
import { maskGrid } from '../../../src/detect/masks/grid.ts';
import { buildPredictResponse, type MaskedDetection } from '../../../src/detect/pipeline.ts';

const M = 6;
const plane = (k: number) => Float32Array.from({ length: M * M }, (_, i) => ((i % M) + Math.floor(i / M) < k ? 3 : -3));
const det = (k: number, logits?: Float32Array): MaskedDetection => ({
  label: 'cat', label_id: 17, score: 0.9 - k / 100, box: [1, 2, 30, 40], box_cxcywh_norm: [0.5, 0.5, 0.2, 0.3], query: k, ...(logits ? { maskLogits: logits } : {}),
});
const timing = { decode: 1, preprocess: 1, inference: 1, postprocess: 1, total: 1, queue: 0, transfer: 0 };

test('each segmentation detection gets its mask in the requested format, at the image size', async () => {
  const dets = [det(3, plane(3)), det(7, plane(7))];
  const grid = maskGrid(M, 50, 40);
  assert.deepEqual(await detectionMasks(dets, 50, 40, 'rle'), [maskRle(plane(3), grid), maskRle(plane(7), grid)]);
  assert.deepEqual(await detectionMasks(dets, 50, 40, 'polygon'), [maskPolygons(plane(3), grid), maskPolygons(plane(7), grid)]);
  assert.deepEqual(((await detectionMasks(dets, 50, 40, 'rle'))![0] as { size: number[] }).size, [40, 50]);
  assert.equal(await detectionMasks(dets, 50, 40, 'none'), undefined);
  assert.equal(await detectionMasks([det(1), det(2)], 50, 40, 'rle'), undefined, 'a detection model has no masks');
  await assert.rejects(detectionMasks([det(1, plane(1)), det(2)], 50, 40, 'rle'), /detection 1 \(cat 0\.88\) has no mask logits while others have/);
});

test('the response: mask right after box_cxcywh_norm; a detection model\'s detections keep exactly their keys', async () => {
  const dets = [det(3, plane(3))];
  const masks = await detectionMasks(dets, 50, 40, 'rle');
  const seg = buildPredictResponse({ detections: dets, masks, width: 50, height: 40, inputSize: [24, 24], threshold: 0.5, timing });
  assert.deepEqual(Object.keys(seg.detections[0]!), ['label', 'label_id', 'score', 'box', 'box_cxcywh_norm', 'mask']);
  assert.deepEqual(seg.detections[0]!.mask, masks![0]);
  const plain = buildPredictResponse({ detections: [det(3)], width: 50, height: 40, inputSize: [24, 24], threshold: 0.5, timing });
  assert.deepEqual(Object.keys(plain.detections[0]!), ['label', 'label_id', 'score', 'box', 'box_cxcywh_norm']);
  assert.ok(!JSON.stringify(seg).includes('maskLogits') && !JSON.stringify(seg).includes('query'));
});

test('the event loop gets turns while a large response\'s masks are made (a probe is answered meanwhile)', async () => {
  // 100 masks at 4000×3000 from planes with a wavy boundary: well over the 10 ms after which the maker yields.
  const M2 = 78;
  const wavy = (k: number) => Float32Array.from({ length: M2 * M2 }, (_, i) => Math.sin((i % M2) / 3 + k) + Math.cos(Math.floor(i / M2) / 4));
  const dets = Array.from({ length: 100 }, (_, k) => det(k, wavy(k)));
  let turns = 0;
  let done = false;
  const tick = () => {
    if (done) return;
    turns++;
    setImmediate(tick);
  };
  setImmediate(tick);
  const masks = await detectionMasks(dets, 4000, 3000, 'rle');
  done = true;
  assert.equal(masks!.length, 100);
  assert.ok(turns >= 2, `the loop ran ${turns} times while 100 masks were made`);
});
