// The segment task through detectDecoded: its outputs (pred_masks [Q, S/4, S/4], rows selected), the request's
// select built from the detect parameters (none when masks are not wanted, none for a detect model), each kept
// detection handed its query's mask-logit row, a kept detection without a row an error naming its query, and
// return_raw without the masks. A ScriptedBackend plays the segment model with the sidecar's selection rule.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { detectDecoded, type DetectParams } from '../../src/detect/pipeline.ts';
import { helloTaskError, maskSideOf, selectedOutputOf, taskFor } from '../../src/detect/tasks.ts';
import type { InferInput, InferOptions, InferResult, SidecarInfo } from '../../src/sidecar/backend.ts';
import type { RgbImage } from '../../src/image/decode.ts';
import { RfdetrError } from '../../src/errors.ts';
import { ScriptedBackend, type ScriptedHead } from '../helpers/scripted-backend.ts';
import { testSidecarInfo } from '../helpers/sidecar-info.ts';

const Q = 6;
const C = 3;
const M = 4; // input side 16
const info = (task: string) => testSidecarInfo({
  protocolVersion: 4, sidecarVersion: 't', engine: 't', device: 't', inputShape: [3, 16, 16], numQueries: Q, numClasses: C, labels: ['a', 'b', 'c'], variant: 'seg-nano', task,
});
// Best class and logit per query: q0 b 3.0, q1 a 2.0, q2 c 1.0, q3 b 0.5, q4 a -1.0, q5 c 2.5.
const best: [number, number][] = [[1, 3], [0, 2], [2, 1], [1, 0.5], [0, -1], [2, 2.5]];
const logits = new Float32Array(Q * C).fill(-8);
best.forEach(([c, l], q) => (logits[q * C + c] = l));
const predBoxes = Float32Array.from({ length: Q * 4 }, (_, i) => 0.1 + (i % 4) * 0.1);
const maskOf = (q: number) => Float32Array.from({ length: M * M }, (_, i) => q * 100 + i);
const head: ScriptedHead = { logits, predBoxes, maskOf };

class SegmentModel extends ScriptedBackend {
  info: SidecarInfo;
  calls: InferOptions[] = [];
  /** Drop this query's row from the reply (a sidecar breaking the contract). */
  dropQuery: number | undefined;
  constructor(task = 'segment') {
    super();
    this.info = info(task);
  }
  async infer(_input: InferInput, opts: InferOptions = {}): Promise<InferResult> {
    this.calls.push(opts);
    const out = this.headOutputs(head, opts);
    if (this.dropQuery !== undefined && out.rows?.pred_masks) {
      const keep = Array.from(out.rows.pred_masks).map((q, r) => [q, r] as const).filter(([q]) => q !== this.dropQuery);
      out.outputs.pred_masks = Float32Array.from(keep.flatMap(([, r]) => Array.from(out.outputs.pred_masks!.subarray(r * M * M, (r + 1) * M * M))));
      out.rows.pred_masks = Uint32Array.from(keep.map(([q]) => q));
    }
    return { ...out, preprocessMs: 0, forwardMs: 0, transferMs: 0 };
  }
  async close(): Promise<void> {}
  destroy(): void {}
}

const image: RgbImage = { width: 32, height: 24, data: new Uint8Array(32 * 24 * 3) };
const run = async (model: SegmentModel, params: DetectParams) =>
  detectDecoded((input, o) => model.infer(input, o), model.info, image, params, { t0: performance.now(), decodeMs: 0 });

test('segment task: logits, pred_boxes, then pred_masks [Q, S/4, S/4] rows selected; a hello must declare it so', () => {
  const seg = taskFor('segment');
  const dims = { numQueries: 200, numClasses: 91, inputShape: [3, 504, 504] as [number, number, number] };
  assert.deepEqual(seg.outputs(dims).map((o) => [o.name, o.shape, o.rows]), [
    ['logits', [200, 91], undefined], ['pred_boxes', [200, 4], undefined], ['pred_masks', [200, 126, 126], 'selected'],
  ]);
  assert.equal(maskSideOf({ ...dims, inputShape: [3, 312, 312] }), 78);
  assert.equal(selectedOutputOf(taskFor('detect'), dims), undefined);
  const outputs = seg.outputs(dims);
  assert.equal(helloTaskError({ ...dims, task: 'segment', outputs }), undefined);
  assert.match(helloTaskError({ ...dims, task: 'segment', outputs: outputs.map((o) => ({ ...o, rows: undefined })) }) ?? '',
    /reads the output pred_masks f32 \[200,126,126\] rows selected, but the sidecar declares pred_masks f32 \[200,126,126\]/);
  assert.match(helloTaskError({ ...dims, task: 'segment', outputs: outputs.slice(0, 2) }) ?? '', /declares no 'pred_masks'/);
});

test('detectDecoded sends the detect parameters as the select, and each kept detection gets its query\'s mask row', async () => {
  const model = new SegmentModel();
  const r = await run(model, { threshold: 0.6, max_detections: 3 });
  assert.deepEqual(model.calls[0]!.select, { threshold: 0.6, max: 3 });
  assert.deepEqual(r.detections.map((d) => d.query), [0, 5, 1]);
  assert.equal(r.maskSide, M);
  for (const d of r.detections) assert.deepEqual(Array.from(d.maskLogits!), Array.from(maskOf(d.query)), `query ${d.query}`);
  // The response: the detect response plus each detection's mask (src/detect/masks/), after box_cxcywh_norm.
  assert.deepEqual(Object.keys(r.response.detections[0]!), ['label', 'label_id', 'score', 'box', 'box_cxcywh_norm', 'mask']);

  const byClass = new SegmentModel();
  const c = await run(byClass, { threshold: 0.6, max_detections: 5, classes: new Set([2, 0]), classThresholds: new Map([[2, 0.9]]) });
  assert.deepEqual(byClass.calls[0]!.select, { threshold: 0.6, max: 5, classes: [2, 0], classThresholds: new Map([[2, 0.9]]) });
  assert.deepEqual(c.detections.map((d) => [d.query, d.label]), [[5, 'c'], [1, 'a']]);
  assert.ok(c.detections.every((d) => d.maskLogits?.length === M * M));
});

test('masks: false and a detect model send no select and attach nothing', async () => {
  const off = new SegmentModel();
  const r = await run(off, { threshold: 0.6, max_detections: 3, masks: false });
  assert.equal(off.calls[0]!.select, undefined);
  assert.equal(r.maskSide, undefined);
  assert.ok(r.detections.length === 3 && r.detections.every((d) => d.maskLogits === undefined));
  const detect = new SegmentModel('detect');
  const d = await run(detect, { threshold: 0.6, max_detections: 3 });
  assert.deepEqual(Object.keys(detect.calls[0]!), ['signal', 'deadlineMs'], 'a detect forward\'s options are as before');
  assert.deepEqual(JSON.stringify({ ...d.response, timing_ms: 0 }), JSON.stringify({ ...r.response, timing_ms: 0 }), 'the same response bytes');
});

test('return_raw on a segment model carries logits and pred_boxes only', async () => {
  const r = await run(new SegmentModel(), { threshold: 0.6, max_detections: 3, return_raw: true });
  assert.deepEqual(Object.keys(r.response.raw!), ['logits', 'pred_boxes']);
});

test('a kept detection whose query has no row is an internal error naming the query', async () => {
  const model = new SegmentModel();
  model.dropQuery = 5;
  await assert.rejects(run(model, { threshold: 0.6, max_detections: 3 }), (e: unknown) =>
    e instanceof RfdetrError && e.code === 'E_INTERNAL' && /detection of query 5 \(c, score [0-9.]+\) was kept but the sidecar sent no 'pred_masks' row for it \(rows for queries 0, 1\)/.test(e.message));
});
