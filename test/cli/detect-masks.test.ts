// rfdetr detect on a segment model (test/http's FakeBackend with a segment hello, each query's mask logits the
// left half of the plane for even queries): --json lines (images and video frames, with --track) carry each
// detection's mask in the --mask-format asked, --mask-format none sends no select and prints no masks, and
// --save paints the masks (the saved picture differs from the one without masks).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { caseImage, runInProcess } from './helpers.ts';
import { cocoLabels, FakeBackend, fixedResponder } from '../http/helpers.ts';
import { testSidecarInfo } from '../helpers/sidecar-info.ts';
import { countsFromString, decodeCounts } from '../helpers/coco-rle-codec.ts';
import { makeVideo } from '../helpers/videos.ts';

function segmentBackend(): FakeBackend {
  const b = new FakeBackend();
  b.info = testSidecarInfo({
    protocolVersion: 4, sidecarVersion: 'fake-0', engine: 'fake', device: 'fake device (test)', inputShape: [3, 560, 560],
    numQueries: 300, numClasses: 91, labels: cocoLabels(), variant: 'seg-nano', task: 'segment',
  });
  b.respond = () => ({ ...fixedResponder(), maskOf: (q: number) => Float32Array.from({ length: 140 * 140 }, (_, i) => (q % 2 === 0 && i % 140 < 70 ? 2 : -2)) });
  return b;
}

interface Line { image_size: { width: number; height: number }; detections: { mask?: unknown; track_id?: number | null }[] }
const lines = (out: string) => out.trim().split('\n').map((l) => JSON.parse(l) as Line);

test('detect --json on a segment model: RLE masks by default, polygons with --mask-format polygon, none without select', async () => {
  const rle = await runInProcess(['detect', '--json', '--threshold', '0.3', caseImage('case-1')], { backend: segmentBackend() });
  assert.equal(rle.code, 0, rle.stderr);
  const [l] = lines(rle.stdout);
  const { width, height } = l!.image_size;
  assert.ok(l!.detections.length > 0);
  let nonEmpty = 0;
  for (const d of l!.detections) {
    const m = d.mask as { size: number[]; counts: string };
    assert.deepEqual(m.size, [height, width]);
    const set = decodeCounts(countsFromString(m.counts), height, width).reduce((a, b) => a + b, 0);
    assert.ok(set === 0 || set === height * (width / 2), `${set} pixels`);
    if (set) nonEmpty++;
  }
  assert.ok(nonEmpty > 0);
  const poly = await runInProcess(['detect', '--json', '--threshold', '0.3', '--mask-format', 'polygon', caseImage('case-1')], { backend: segmentBackend() });
  assert.ok(lines(poly.stdout)[0]!.detections.every((d) => Array.isArray(d.mask)));
  const noneBackend = segmentBackend();
  const none = await runInProcess(['detect', '--json', '--threshold', '0.3', '--mask-format', 'none', caseImage('case-1')], { backend: noneBackend });
  assert.equal(noneBackend.lastOptions?.select, undefined);
  assert.ok(lines(none.stdout)[0]!.detections.every((d) => !('mask' in d)));
});

test('detect --save on a segment model paints the masks', async () => {
  const dirs = [0, 1].map(() => fs.mkdtempSync(path.join(os.tmpdir(), 'rfdetr-masks-save-')));
  const a = await runInProcess(['detect', '--threshold', '0.3', '--save', dirs[0]!, caseImage('case-1')], { backend: segmentBackend() });
  const b = await runInProcess(['detect', '--threshold', '0.3', '--mask-format', 'none', '--save', dirs[1]!, caseImage('case-1')], { backend: segmentBackend() });
  assert.equal(a.code, 0, a.stderr);
  assert.equal(b.code, 0, b.stderr);
  const [pa, pb] = await Promise.all(dirs.map((d) => sharp(path.join(d, fs.readdirSync(d)[0]!)).raw().toBuffer()));
  let differ = 0;
  for (let i = 0; i < pa!.length; i++) if (pa![i] !== pb![i]) differ++;
  assert.ok(differ > 1000, `${differ} bytes differ between the picture with masks and without`);
});

test('detect --json --track on a video of a segment model: every frame\'s detections carry masks, track_id after them', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rfdetr-masks-video-'));
  const video = makeVideo(dir, 'clip.mp4', { frames: 4 });
  const out = path.join(dir, 'out');
  const r = await runInProcess(['detect', '--json', '--track', '--threshold', '0.3', '--save', out, video], { backend: segmentBackend() });
  assert.equal(r.code, 0, r.stderr);
  const ls = lines(r.stdout);
  assert.equal(ls.length, 4);
  for (const l of ls) {
    assert.ok(l.detections.length > 0);
    for (const d of l.detections) {
      assert.deepEqual((d.mask as { size: number[] }).size, [l.image_size.height, l.image_size.width]);
      assert.deepEqual(Object.keys(d).slice(-2), ['mask', 'track_id']);
    }
  }
  assert.equal(fs.readdirSync(out).length, 1, 'the annotated video');
});
