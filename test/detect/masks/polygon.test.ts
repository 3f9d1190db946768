// The polygon tracer (src/detect/masks/polygon.ts) against per-pixel references (test/helpers/mask-bitmaps.ts):
// outer contours only, 4-connected components, pixel-corner coordinates. On every mask the pixels whose centre
// lies inside some contour are exactly the mask plus its holes (background not 8-connected to the border); there
// is one contour per 4-connected component (none per hole); and on masks without holes the contours'
// shoelace areas add up to the mask's pixel count within 2 % (with pixel-corner contours they are equal). Masks:
// hand-made shapes, random bitmaps, and each Seg fixture size's masks from the product's upsample (decoded with
// the tests' own COCO decoder).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { maskGrid } from '../../../src/detect/masks/grid.ts';
import { maskPolygons, maskRle } from '../../../src/detect/masks/encode.ts';
import { PolygonTracer } from '../../../src/detect/masks/polygon.ts';
import { countsFromString, decodeCounts } from '../../helpers/coco-rle-codec.ts';
import { components4, countSet, feedBitmap, filled, rasterize, shoelace } from '../../helpers/mask-bitmaps.ts';
import { SEG_SIZES, hasSegFixture, readSegCase, segFixturesDir } from '../../helpers/seg-fixtures.ts';
import { skipOrFail } from '../../helpers/skip.ts';

function trace(bits: Uint8Array, w: number, h: number): number[][] {
  const t = new PolygonTracer(w, h);
  feedBitmap(bits, w, h, t);
  return t.finish();
}

/** Checks the contours of one mask; returns whether it has holes. */
function check(what: string, bits: Uint8Array, w: number, h: number, polys: number[][]): boolean {
  for (const p of polys) {
    assert.ok(p.length >= 8 && p.length % 2 === 0, `${what}: a contour of ${p.length} numbers`);
    assert.ok(p.every((v, i) => Number.isInteger(v) && v >= 0 && v <= (i % 2 ? h : w)), `${what}: a contour point off the pixel corners`);
  }
  const full = filled(bits, w, h);
  const r = rasterize(polys, w, h);
  for (let p = 0; p < w * h; p++) {
    if (r[p] !== full[p]) assert.fail(`${what}: pixel (${Math.floor(p / h)}, ${p % h}) is ${r[p] ? '' : 'not '}inside the contours but ${full[p] ? 'in' : 'outside'} the mask and its holes`);
  }
  // One outer contour per component, none for a hole.
  assert.equal(polys.length, components4(bits, w, h), `${what}: contours vs 4-connected components`);
  const pixels = countSet(bits);
  const holes = countSet(full) !== pixels;
  if (!holes) {
    const area = polys.reduce((s, p) => s + shoelace(p), 0);
    assert.ok(Math.abs(area - pixels) <= 0.02 * pixels, `${what}: contour area ${area} vs ${pixels} pixels`);
  }
  return holes;
}

const bitmap = (rows: string[]): [Uint8Array, number, number] => {
  const h = rows.length, w = rows[0]!.length;
  const b = new Uint8Array(w * h);
  rows.forEach((r, y) => [...r].forEach((c, x) => (b[x * h + y] = c === '#' ? 1 : 0)));
  return [b, w, h];
};

test('contours of hand-made masks: a pixel, an L, diagonal pixels, a ring, an island in a hole, the whole image', () => {
  const [px, pw, ph] = bitmap(['....', '..#.', '....']);
  assert.deepEqual(trace(px, pw, ph), [[3, 1, 3, 2, 2, 2, 2, 1]]);
  const [l, lw, lh] = bitmap(['#..', '#..', '###']);
  const lp = trace(l, lw, lh);
  assert.equal(lp.length, 1);
  assert.equal(lp[0]!.length, 12, 'an L has 6 corners');
  check('L', l, lw, lh, lp);
  const [d, dw, dh] = bitmap(['#.', '.#']);
  assert.equal(trace(d, dw, dh).length, 2, 'diagonal pixels are two components');
  check('diagonal', d, dw, dh, trace(d, dw, dh));
  const [ring, rw, rh] = bitmap(['#####', '#...#', '#.#.#', '#...#', '#####']);
  const rp = trace(ring, rw, rh);
  assert.equal(rp.length, 2, 'the ring and the island each have an outer contour');
  assert.ok(check('ring', ring, rw, rh, rp), 'the ring has a hole');
  assert.deepEqual(rp.map(shoelace).sort((a, b) => a - b), [1, 25], 'outer contours only: the hole is not subtracted');
  const [all, aw, ah] = bitmap(['###', '###']);
  assert.deepEqual(trace(all, aw, ah), [[3, 0, 3, 2, 0, 2, 0, 0]]);
  assert.deepEqual(trace(new Uint8Array(12), 4, 3), []);
});

test('contours of random bitmaps equal the mask and its holes, pixel for pixel', () => {
  let s = 12345;
  const rnd = () => ((s = (Math.imul(s, 1103515245) + 12345) >>> 0) / 2 ** 32);
  let withHoles = 0;
  for (let k = 0; k < 300; k++) {
    const w = 1 + Math.floor(rnd() * 30), h = 1 + Math.floor(rnd() * 30);
    const density = 0.2 + rnd() * 0.6;
    const bits = new Uint8Array(w * h).map(() => (rnd() < density ? 1 : 0));
    if (check(`bitmap ${k} (${w}×${h})`, bits, w, h, trace(bits, w, h))) withHoles++;
  }
  assert.ok(withHoles > 10 && withHoles < 290, `${withHoles} of 300 had holes: not a mix`);
});

for (const size of SEG_SIZES) {
  test(`seg-${size} case-1: the polygons of every stored mask cover it and its holes; area within 2 % where it has none`, (t) => {
    if (!hasSegFixture(size)) return skipOrFail(t, `no rfdetr-seg fixtures at ${segFixturesDir} (set RFDETR_SEG_FIXTURES)`);
    const c = readSegCase(size);
    const grid = maskGrid(c.side, c.width, c.height);
    let holeFree = 0, masks = 0;
    for (const [q, plane] of c.planes) {
      if (!c.detections.some((d) => d.query === q)) continue;
      const bits = decodeCounts(countsFromString(maskRle(plane, grid).counts), c.height, c.width);
      if (!check(`query ${q}`, bits, c.width, c.height, maskPolygons(plane, grid))) holeFree++;
      masks++;
    }
    assert.ok(masks >= 10, `only ${masks} masks`);
    t.diagnostic(`${masks} masks, ${holeFree} without holes`);
  });
}
