// Annotated images: label tags never cover each other (above the box, else inside its top edge, else left out
// and counted), never leave or swamp the image, and the bytes are PNG or JPEG as asked.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import sharp from 'sharp';
import { annotate, formatForName, layoutLabels, overlaySvg, type DrawableDetection } from '../../src/draw/annotate.ts';

interface Tag { x: number; y: number; w: number; h: number }

/** The label tags in an overlay: the filled rects (boxes are fill="none"). */
function tags(svg: string): Tag[] {
  return [...svg.matchAll(/<rect x="([-\d.]+)" y="([-\d.]+)" width="([\d.]+)" height="([\d.]+)" fill="#/g)]
    .map((m) => ({ x: Number(m[1]), y: Number(m[2]), w: Number(m[3]), h: Number(m[4]) }));
}

function overlap(a: Tag, b: Tag): boolean {
  return a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;
}

const det = (label: string, score: number, box: number[], id = 1): DrawableDetection => ({ label, label_id: id, score, box });

test('annotate: labels of boxes sharing a top edge do not overlap; the second goes inside its box; a third is left out', () => {
  const dets = [det('cat', 0.9, [100, 100, 300, 300]), det('dog', 0.8, [110, 102, 310, 300], 2), det('cow', 0.7, [105, 101, 305, 300], 3)];
  const svg = overlaySvg(640, 480, dets);
  const t = tags(svg);
  for (let i = 0; i < t.length; i++) for (let j = i + 1; j < t.length; j++) assert.ok(!overlap(t[i]!, t[j]!), `tags ${i} and ${j} overlap: ${JSON.stringify([t[i], t[j]])}`);
  const l = layoutLabels(640, 480, dets);
  assert.deepEqual(l.placed.map((p) => [p.index, p.where]), [[0, 'above'], [1, 'inside']]);
  assert.deepEqual(l.skipped, [2]);
  assert.equal(t.length, 2, 'the left-out label is not drawn');
  assert.equal((svg.match(/fill="none"/g) ?? []).length, 6, 'every box is still drawn (outline + colour)');
});

test('annotate: no room above (the image edge) → inside the box; labels stay inside the image; a tag wider than a tiny image is left out', () => {
  const top = layoutLabels(640, 480, [det('person', 0.9, [600, 0, 640, 200])]);
  assert.equal(top.placed[0]!.where, 'inside');
  const r = top.placed[0]!.rect;
  assert.ok(r.x >= 0 && r.y >= 0 && r.x + r.w <= 640 && r.y + r.h <= 480, JSON.stringify(r));
  const tiny = layoutLabels(48, 32, [det('traffic light', 0.9, [2, 2, 40, 30])]);
  assert.deepEqual([tiny.placed.length, tiny.skipped], [0, [0]]);
  for (const t of tags(overlaySvg(48, 32, [det('traffic light', 0.9, [2, 2, 40, 30])]))) {
    assert.ok(t.x >= 0 && t.x + t.w <= 48 && t.y >= 0 && t.y + t.h <= 32, `tag ${JSON.stringify(t)} leaves the 48x32 image`);
  }
});

test('annotate: PNG or JPEG bytes as asked; the format follows the output name', async () => {
  const img = { data: new Uint8Array(64 * 48 * 3).fill(120), width: 64, height: 48 };
  const dets = [det('a', 0.9, [5, 20, 40, 40])];
  const png = await annotate(img, dets, 'png');
  const jpeg = await annotate(img, dets, 'jpeg');
  assert.deepEqual([...png.subarray(0, 4)], [0x89, 0x50, 0x4e, 0x47]);
  assert.deepEqual([...jpeg.subarray(0, 3)], [0xff, 0xd8, 0xff]);
  assert.deepEqual([(await sharp(jpeg).metadata()).format, (await sharp(png).metadata()).format], ['jpeg', 'png']);
  assert.deepEqual(['x.jpg', 'x.JPEG', 'x.png', 'x.webp', 'stdin'].map(formatForName), ['jpeg', 'jpeg', 'png', 'png', 'png']);
});
