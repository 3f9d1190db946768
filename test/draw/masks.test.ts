// Segmentation masks in the annotation (src/draw/annotate.ts): each detection's mask (the response's `mask`,
// COCO RLE or polygons) is painted translucent in its box colour under the boxes. A pixel inside a mask and away
// from every box and label is the blend of the image and the colour at alpha 0.4; one outside every mask and
// overlay is the image's own; the polygons of a mask without holes paint the same pixels as its RLE.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { maskPolygons, maskRle } from '../../src/detect/masks/encode.ts';
import { maskGrid } from '../../src/detect/masks/grid.ts';
import { MASK_ALPHA, annotateRaw, classColour, layoutLabels, overlayBounds, type DrawableDetection } from '../../src/draw/annotate.ts';

const W = 200;
const H = 120;
const image = { width: W, height: H, data: Uint8Array.from({ length: W * H * 3 }, (_, i) => (i * 5 + (i >> 8)) & 255) };
const M = 8;
/** Positive logits on the left half of the mask plane's top rows: the mask covers about x < 100, y < 45. */
const logits = Float32Array.from({ length: M * M }, (_, k) => (Math.floor(k / M) < 3 && k % M < 4 ? 5 : -5));
const det: DrawableDetection = { label: 'cat', label_id: 17, score: 0.9, box: [150, 80, 190, 110], mask: maskRle(logits, maskGrid(M, W, H)) };

const blend = (c: number, px: number) => Math.floor((c * MASK_ALPHA + px * (255 - MASK_ALPHA) + 127) / 255);

test('a pixel inside a mask is blended with the box colour at alpha 0.4; one outside every mask and box is not', async () => {
  const got = await annotateRaw(image, [det]);
  const colour = classColour(17);
  const b = overlayBounds(W, H, [det], layoutLabels(W, H, [det]))!;
  assert.ok(b.x > 120 && b.y > 50, 'the box and its label stay clear of the mask');
  for (const [x, y] of [[10, 10], [60, 30], [0, 0]] as const) {
    const i = (y * W + x) * 3;
    assert.deepEqual([got[i], got[i + 1], got[i + 2]], colour.map((c, k) => blend(c, image.data[i + k]!)), `pixel (${x}, ${y}) inside the mask`);
  }
  for (const [x, y] of [[120, 10], [10, 70], [100, 100]] as const) {
    const i = (y * W + x) * 3;
    assert.deepEqual([got[i], got[i + 1], got[i + 2]], [image.data[i], image.data[i + 1], image.data[i + 2]], `pixel (${x}, ${y}) outside the mask`);
  }
});

test('the polygons of a mask without holes paint the same pixels as its RLE', async () => {
  const polygons = maskPolygons(logits, maskGrid(M, W, H));
  assert.equal(polygons.length, 1);
  assert.deepEqual(await annotateRaw(image, [{ ...det, mask: polygons }]), await annotateRaw(image, [det]));
});

test('without a mask nothing but the box and label is drawn', async () => {
  const got = await annotateRaw(image, [{ ...det, mask: undefined }]);
  const i = (10 * W + 10) * 3;
  assert.deepEqual([got[i], got[i + 1], got[i + 2]], [image.data[i], image.data[i + 1], image.data[i + 2]]);
});
