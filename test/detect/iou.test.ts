import { test } from 'node:test';
import assert from 'node:assert/strict';
import { boxIou, detectionIou, matchDetections, type LabelledBox } from '../../src/detect/iou.ts';

const d = (label_id: number, box: [number, number, number, number]): LabelledBox => ({ label_id, box });

test('boxIou: identical, disjoint, half overlap, contained, and degenerate (clamped) boxes', () => {
  assert.equal(boxIou([0, 0, 10, 10], [0, 0, 10, 10]), 1);
  assert.equal(boxIou([0, 0, 10, 10], [20, 20, 30, 30]), 0);
  assert.equal(boxIou([0, 0, 10, 10], [5, 0, 15, 10]), 50 / 150);
  assert.equal(boxIou([0, 0, 10, 10], [2, 2, 7, 7]), 25 / 100);
  assert.equal(boxIou([0, 0, 10, 10], [10, 0, 20, 10]), 0, 'touching edges do not overlap');
  assert.equal(boxIou([640, 10, 640, 20], [640, 10, 640, 20]), 1);
  assert.equal(boxIou([640, 10, 640, 20], [640, 10.3, 640, 20.2]), 1);
  assert.equal(boxIou([640, 10, 640, 20], [640, 15, 640, 30]), 0);
  assert.equal(boxIou([640, 10, 640, 20], [630, 10, 640, 20]), 0);
});

test('detectionIou: best same-label match per reference detection, mean x 100', () => {
  const ref = [d(1, [0, 0, 10, 10]), d(2, [20, 20, 30, 30])];
  assert.equal(detectionIou(ref, ref), 100);
  assert.equal(detectionIou(ref, [...ref].reverse()), 100, 'order does not matter');
  // label 2's box is found only with the wrong label: it scores 0
  assert.equal(detectionIou(ref, [d(1, [0, 0, 10, 10]), d(3, [20, 20, 30, 30])]), 50);
  // the best of several candidates counts
  const got = [d(1, [5, 0, 15, 10]), d(1, [0, 0, 10, 10]), d(2, [25, 20, 35, 30])];
  assert.equal(detectionIou(ref, got), ((1 + 50 / 150) / 2) * 100);
  assert.deepEqual(matchDetections(ref, got).map((m) => m.got), [1, 2]);
  assert.deepEqual(matchDetections(ref, []), [{ ref: 0, got: -1, iou: 0 }, { ref: 1, got: -1, iou: 0 }]);
  assert.equal(detectionIou(ref, []), 0);
  assert.equal(detectionIou([], []), 100);
  assert.equal(detectionIou([], got), 0);
});
