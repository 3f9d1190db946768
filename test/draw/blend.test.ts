// The overlay is rendered over just the part of the image it covers and blended here: the result is the full
// overlay composited by libvips (within one level of rounding), and no pixel outside that part changes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import sharp from 'sharp';
import { annotateRaw, layoutLabels, overlayBounds, overlaySvg, type DrawableDetection } from '../../src/draw/annotate.ts';

const W = 320;
const H = 240;
/** A gradient, so every blended pixel has its own background. */
const image = { width: W, height: H, data: Uint8Array.from({ length: W * H * 3 }, (_, i) => (i * 7 + (i >> 9)) & 255) };
const dets: DrawableDetection[] = [
  { label: 'person', label_id: 1, score: 0.91, box: [40.4, 60.2, 130.7, 200.1] },
  { label: 'dog', label_id: 18, score: 0.55, box: [150, 20.5, 300.25, 120] },
  { label: 'cat', label_id: 17, score: 0.7, box: [0, 0, 30, 25] },
];

test('annotateRaw equals libvips compositing the whole-image overlay, within one level', async () => {
  const got = await annotateRaw(image, dets);
  const want = await sharp(Buffer.from(image.data), { raw: { width: W, height: H, channels: 3 } })
    .composite([{ input: Buffer.from(overlaySvg(W, H, dets)), top: 0, left: 0 }]).removeAlpha().raw().toBuffer();
  assert.equal(got.length, want.length);
  let max = 0;
  let changed = 0;
  for (let i = 0; i < got.length; i++) {
    max = Math.max(max, Math.abs(got[i]! - want[i]!));
    if (want[i] !== image.data[i]) changed++;
  }
  assert.ok(changed > 1000, `the overlay draws something (${changed} bytes)`);
  assert.ok(max <= 1, `largest difference ${max}`);
});

test('pixels outside the overlay\'s bounds are the image\'s own; the input is not modified', async () => {
  const before = Buffer.from(image.data);
  const got = await annotateRaw(image, dets.slice(0, 1));
  const b = overlayBounds(W, H, dets.slice(0, 1), layoutLabels(W, H, dets.slice(0, 1)))!;
  assert.ok(b.w < W && b.h < H, 'one box covers part of the image');
  for (let y = 0; y < H; y++) for (let x = 0; x < W; x++) {
    if (x >= b.x && x < b.x + b.w && y >= b.y && y < b.y + b.h) continue;
    const i = (y * W + x) * 3;
    assert.equal(got[i], image.data[i], `pixel ${x},${y}`);
  }
  assert.ok(before.equals(Buffer.from(image.data)), 'input untouched');
});
