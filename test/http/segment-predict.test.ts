// /predict on a segment model (a FakeBackend whose hello declares pred_masks rows selected): the request's
// detect parameters reach the backend as its select, the response is the detect response, and the mask rows
// the reply can carry are reserved in the memory budget with the pixels (selectedRowsCost).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cocoLabels, FakeBackend, fixedResponder, goldens, postJson, start, waitFor } from './helpers.ts';
import { testSidecarInfo } from '../helpers/sidecar-info.ts';
import { selectedRowsCost } from '../../src/http/memory-budget.ts';

function segmentBackend(): FakeBackend {
  const b = new FakeBackend();
  b.info = testSidecarInfo({
    protocolVersion: 4, sidecarVersion: 'fake-0', engine: 'fake', device: 'fake device (test)', inputShape: [3, 560, 560],
    numQueries: 300, numClasses: 91, labels: cocoLabels(), variant: 'seg-nano', task: 'segment',
  });
  b.respond = () => ({ ...fixedResponder(), maskOf: (q: number) => new Float32Array(140 * 140).fill(q) });
  return b;
}

const png = () => goldens()[0]!.png.toString('base64');

test('predict on a segment model: the detect parameters go to the backend as select; the response is the detect one', async () => {
  const seg = await start({ backend: segmentBackend() });
  const det = await start();
  try {
    const body = { image: png(), threshold: 0.3, max_detections: 5, classes: ['cat', '17'], class_thresholds: { cat: 0.4 } };
    const r = await postJson(seg.url, body);
    assert.equal(r.status, 200, r.text);
    const sel = seg.backend.lastOptions?.select;
    assert.ok(sel, 'a select was sent');
    assert.equal(sel.threshold, 0.3);
    assert.equal(sel.max, 5);
    assert.deepEqual([...(sel.classes ?? [])].sort((a, b) => a - b), [17]);
    assert.deepEqual([...(sel.classThresholds ?? new Map())], [[17, 0.4]]);
    const d = await postJson(det.url, body);
    assert.equal(det.backend.lastOptions?.select, undefined, 'a detect model gets no select');
    assert.deepEqual(r.json.detections, d.json.detections);
  } finally {
    await seg.stop();
    await det.stop();
  }
});

test('predict on a segment model: its mask rows are reserved with the pixels while the forward runs', async () => {
  const held = async (backend?: FakeBackend) => {
    const s = await start(backend ? { backend } : {});
    const open = s.backend.block();
    try {
      const pending = postJson(s.url, { image: png() });
      await waitFor(() => s.backend.inFlight > 0, 'the forward to be held');
      const running = s.srv.admission.memory.work.running;
      open();
      assert.equal((await pending).status, 200);
      return running;
    } finally {
      await s.stop();
    }
  };
  const detect = await held();
  const segment = await held(segmentBackend());
  const rows = selectedRowsCost(segmentBackend().info!.outputs, true);
  assert.equal(rows, 2 * 4 * 300 * 140 * 140);
  assert.equal(segment - detect, rows);
  assert.equal(selectedRowsCost(segmentBackend().info!.outputs, false), 0, 'no masks asked: nothing reserved');
});
