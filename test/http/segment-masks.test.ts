// /predict and /predict/video's parameters on a segment model (a FakeBackend whose hello declares pred_masks rows
// selected, each query's mask logits constant): every detection gets `mask` after box_cxcywh_norm in the
// mask_format asked (COCO RLE by default, polygons), mask_format=none sends no select and gives no mask, and
// return_image paints the masks; /predict/video's frame lines likewise (with track, track_id after the mask).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cocoLabels, FakeBackend, fixedResponder, goldens, postJson, start, u8, waitFor } from './helpers.ts';
import { ndjsonLines, postVideo } from './video-helpers.ts';
import type { OpenVideo } from '../../src/http/predict-video.ts';
import type { VideoSource } from '../../src/video/source.ts';
import { testSidecarInfo } from '../helpers/sidecar-info.ts';
import { countsFromString, decodeCounts } from '../helpers/coco-rle-codec.ts';

function segmentBackend(): FakeBackend {
  const b = new FakeBackend();
  b.info = testSidecarInfo({
    protocolVersion: 4, sidecarVersion: 'fake-0', engine: 'fake', device: 'fake device (test)', inputShape: [3, 560, 560],
    numQueries: 300, numClasses: 91, labels: cocoLabels(), variant: 'seg-nano', task: 'segment',
  });
  // Query q's mask: the left half of the plane when q is even, nothing when odd.
  b.respond = () => ({ ...fixedResponder(), maskOf: (q: number) => Float32Array.from({ length: 140 * 140 }, (_, i) => (q % 2 === 0 && i % 140 < 70 ? 2 : -2)) });
  return b;
}

test('a segment model: mask after box_cxcywh_norm, RLE by default, polygons on request, none sends no select', async () => {
  const s = await start({ backend: segmentBackend() });
  try {
    const g = goldens()[0]!;
    const image = g.png.toString('base64');
    const rle = await postJson(s.url, { image, threshold: 0.3 });
    assert.equal(rle.status, 200, rle.text);
    const { width, height } = rle.json.image_size;
    assert.ok(rle.json.detections.length > 0);
    const queries: number[] = [];
    for (const d of rle.json.detections) {
      assert.deepEqual(Object.keys(d), ['label', 'label_id', 'score', 'box', 'box_cxcywh_norm', 'mask']);
      assert.deepEqual(d.mask.size, [height, width]);
      const bits = decodeCounts(countsFromString(d.mask.counts), height, width);
      const set = bits.reduce((a: number, b: number) => a + b, 0);
      // Left half (column-major: the first half of the columns) or nothing.
      assert.ok(set === 0 || set === height * (width / 2), `${set} pixels set`);
      queries.push(set);
    }
    assert.ok(queries.some((n) => n > 0), 'some mask is not empty');
    const poly = await postJson(s.url, { image, threshold: 0.3, mask_format: 'polygon' });
    assert.equal(poly.status, 200, poly.text);
    poly.json.detections.forEach((d: { mask: number[][] }, i: number) => {
      assert.deepEqual(d.mask, queries[i] ? [[width / 2, 0, width / 2, height, 0, height, 0, 0]] : [], `detection ${i}`);
    });
    const none = await postJson(s.url, { image, threshold: 0.3, mask_format: 'none' });
    assert.equal(none.status, 200, none.text);
    assert.equal(s.backend.lastOptions?.select, undefined, 'no select');
    assert.equal(none.json.detections.length, rle.json.detections.length);
    assert.ok(none.json.detections.every((d: object) => !('mask' in d)));
    const drawn = await postJson(s.url, { image, threshold: 0.3, return_image: 'png', mask_format: 'none' });
    const painted = await postJson(s.url, { image, threshold: 0.3, return_image: 'png' });
    assert.notEqual(painted.json.annotated_image.base64, drawn.json.annotated_image.base64, 'the masks are painted');
  } finally {
    await s.stop();
  }
});

/** A scripted video of `frames` grey 64×48 frames (the bytes sent are ignored). */
const threeFrames: OpenVideo = async () => {
  const source: VideoSource = {
    info: { width: 64, height: 48, fps: 30, rotation: 0, hasAudio: false, codec: 'scripted', container: 'scripted', frameCount: 3, durationMs: 100 },
    fps: 30,
    frames: 3,
    async *[Symbol.asyncIterator]() {
      for (let i = 0; i < 3; i++) yield { index: i, ptsMs: (i * 1000) / 30, width: 64, height: 48, rgb: Buffer.alloc(64 * 48 * 3, 128) };
    },
    async close() {},
  };
  return source;
};

test('POST /predict/video on a segment model: each frame line\'s detections carry masks in mask_format, none gives none', async () => {
  const s = await start({ backend: segmentBackend(), openVideo: threeFrames });
  try {
    for (const [query, want] of [['?threshold=0.3&track=1', 'rle'], ['?threshold=0.3&mask_format=polygon', 'polygon'], ['?threshold=0.3&mask_format=none', 'none']] as const) {
      const res = await postVideo(s.url, query, u8(Buffer.from('scripted')));
      assert.equal(res.status, 200);
      const frames = ndjsonLines(await res.text()).filter((l) => 'frame' in l);
      assert.equal(frames.length, 3, query);
      for (const l of frames) {
        assert.ok(l.detections.length > 0);
        for (const d of l.detections) {
          if (want === 'none') assert.ok(!('mask' in d), query);
          else if (want === 'polygon') assert.ok(Array.isArray(d.mask), query);
          else {
            assert.deepEqual(d.mask.size, [48, 64], query);
            assert.deepEqual(Object.keys(d).slice(-2), ['mask', 'track_id']);
          }
        }
      }
    }
    const bad = await postVideo(s.url, '?mask_format=png', u8(Buffer.from('scripted')));
    assert.equal(bad.status, 422);
    assert.match(((await bad.json()) as { detail: string }).detail, /Expected "rle", "polygon" or "none" \(default "rle"\) for mask_format/);
  } finally {
    await s.stop();
  }
});

test('mask_format=none reserves no mask-logit rows: the same memory held as for a detection model', async () => {
  const held = async (backend: FakeBackend | undefined, extra: Record<string, unknown>) => {
    const s = await start(backend ? { backend } : {});
    const open = s.backend.block();
    try {
      const pending = postJson(s.url, { image: goldens()[0]!.png.toString('base64'), ...extra });
      await waitFor(() => s.backend.inFlight > 0, 'the forward to be held');
      const running = s.srv.admission.memory.work.running;
      open();
      assert.equal((await pending).status, 200);
      return running;
    } finally {
      await s.stop();
    }
  };
  const detect = await held(undefined, {});
  assert.equal(await held(segmentBackend(), { mask_format: 'none' }), detect);
  assert.ok((await held(segmentBackend(), {})) > detect, 'with masks the rows are reserved');
});
