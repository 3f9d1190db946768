// The client's check of an infer reply against the hello: exactly the declared outputs, by name, in order,
// each of its declared size; a version-3 reply's logits/pred_boxes become the outputs of those names.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { f32Bytes, type WireOkReply } from '../../src/protocol/codec.ts';
import { inferResultOf } from '../../src/sidecar/infer-reply.ts';
import { testSidecarInfo } from '../helpers/sidecar-info.ts';

const info = (protocolVersion: number) => testSidecarInfo({
  protocolVersion, sidecarVersion: 't', engine: 't', device: 't', inputShape: [3, 64, 64], numQueries: 2, numClasses: 3, labels: ['a', 'b', 'c'], variant: 'base',
});
const timing = { writtenAt: 10, readAt: 20, rtt: 10, encoded: false };
const logits = f32Bytes(Float32Array.from([1, 2, 3, 4, 5, 6]));
const boxes = f32Bytes(Float32Array.from([0, 0.5, 1, 1, 0.25, 0.25, 0.5, 0.5]));
const reply = (over: Partial<WireOkReply>): WireOkReply => ({ kind: 'reply', id: 1, ok: true, preprocess_ms: 1, forward_ms: 2, ...over });

test('infer reply: the outputs the hello declared become the result by name; times and transfer as before', () => {
  const r = inferResultOf(reply({ outputs: { logits, pred_boxes: boxes } }), info(4), timing);
  assert.ok(typeof r !== 'string', String(r));
  assert.deepEqual(Object.keys(r.outputs), ['logits', 'pred_boxes']);
  assert.deepEqual(Array.from(r.outputs.logits!), [1, 2, 3, 4, 5, 6]);
  assert.deepEqual(Array.from(r.outputs.pred_boxes!), [0, 0.5, 1, 1, 0.25, 0.25, 0.5, 0.5]);
  assert.deepEqual([r.preprocessMs, r.forwardMs, r.transferMs, r.frameWrittenAt, r.replyReadAt], [1, 2, 7, 10, 20]);
  const v3 = inferResultOf(reply({ logits, pred_boxes: boxes }), info(3), timing);
  assert.ok(typeof v3 !== 'string', String(v3));
  assert.deepEqual(v3.outputs, r.outputs);
});

test('infer reply: a missing, extra, reordered or wrongly sized output is named against the hello', () => {
  const cases: Array<[WireOkReply, number, RegExp]> = [
    [reply({ outputs: { logits } }), 4, /carries the outputs logits; the hello declared logits \[2,3\], pred_boxes \[2,4\], in that order/],
    [reply({ outputs: { logits, pred_boxes: boxes, masks: boxes } }), 4, /carries the outputs logits, pred_boxes, masks/],
    [reply({ outputs: { pred_boxes: boxes, logits } }), 4, /carries the outputs pred_boxes, logits/],
    [reply({ outputs: { logits, pred_boxes: logits } }), 4, /output pred_boxes is 24 bytes; the hello declared f32 \[2,4\] = 32 bytes/],
    [reply({ logits, pred_boxes: boxes }), 4, /lacks its outputs \(the outputs map\)/],
    [reply({ outputs: { logits, pred_boxes: boxes } }), 3, /lacks its outputs \(logits and pred_boxes\)/],
    [reply({ logits: boxes, pred_boxes: boxes }), 3, /output logits is 32 bytes; the hello declared f32 \[2,3\] = 24 bytes/],
    [reply({ outputs: { logits, pred_boxes: boxes }, forward_ms: undefined }), 4, /lacks preprocess_ms or forward_ms/],
  ];
  for (const [r, version, want] of cases) {
    const got = inferResultOf(r, info(version), timing);
    assert.equal(typeof got, 'string', String(want));
    assert.match(got as string, want);
  }
  assert.match(inferResultOf(reply({ outputs: { logits, pred_boxes: boxes } }), info(4), { ...timing, encoded: true }) as string, /or decode_ms \(the request was image_encoded\)/);
});
