// Each Seg size's case-1 masks (upstream rfdetr 1.11.2's, ../shared/fixtures/rfdetr-seg) against the product's
// upsample + RLE on the golden mask logits, read back with the tests' own COCO decoder (test/helpers/coco-rle-codec.ts):
// at the original image size every pixel outside the fixture's `mask_near_zero` set (|upsampled logit| < 1e-3)
// must equal upstream's; where no pixel differs at all the compressed `counts` string must equal the one
// pycocotools makes of the fixture's counts. At model resolution (the upsample to M×M is the identity) every
// pixel must equal.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { maskGrid } from '../../../src/detect/masks/grid.ts';
import { maskRle } from '../../../src/detect/masks/encode.ts';
import { countsFromString, countsToString, decodeCounts } from '../../helpers/coco-rle-codec.ts';
import { SEG_SIZES, hasSegFixture, readSegCase, segFixturesDir } from '../../helpers/seg-fixtures.ts';
import { skipOrFail } from '../../helpers/skip.ts';

for (const size of SEG_SIZES) {
  test(`seg-${size} case-1: masks at the image size equal upstream's outside the near-zero pixels, and their counts strings pycocotools'`, (t) => {
    if (!hasSegFixture(size)) return skipOrFail(t, `no rfdetr-seg fixtures at ${segFixturesDir} (set RFDETR_SEG_FIXTURES)`);
    const c = readSegCase(size);
    const grid = maskGrid(c.side, c.width, c.height);
    const seen = new Set<number>();
    let compared = 0;
    let exactStrings = 0;
    let differInside = 0;
    let nearTotal = 0;
    for (const d of c.detections) {
      const plane = c.planes.get(d.query);
      if (!plane || seen.has(d.query)) continue;
      seen.add(d.query);
      const ours = maskRle(plane, grid);
      assert.deepEqual(ours.size, [c.height, c.width]);
      assert.deepEqual(d.mask.size, [c.height, c.width]);
      const got = decodeCounts(countsFromString(ours.counts), c.height, c.width);
      const want = decodeCounts(d.mask.counts, c.height, c.width);
      const near = decodeCounts(d.mask_near_zero.pixels.counts, c.height, c.width);
      let outside = 0;
      let inside = 0;
      for (let p = 0; p < got.length; p++) {
        if (got[p] === want[p]) continue;
        if (near[p]) inside++;
        else outside++;
      }
      assert.equal(outside, 0, `query ${d.query}: ${outside} pixels differ from upstream's mask outside the near-zero set`);
      nearTotal += d.mask_near_zero.count;
      differInside += inside;
      if (inside === 0) {
        assert.equal(ours.counts, countsToString(d.mask.counts), `query ${d.query}: the same pixels, another counts string`);
        exactStrings++;
      }
      const model = maskRle(plane, maskGrid(c.side, c.side, c.side));
      assert.deepEqual(countsFromString(model.counts), d.mask_model_res.counts, `query ${d.query}: the M×M mask differs from mask_model_res`);
      compared++;
    }
    assert.ok(compared >= 10, `only ${compared} detections had stored mask logits`);
    t.diagnostic(`${compared} masks compared (${c.side}² → ${c.width}×${c.height}); ${exactStrings} identical counts strings; ${differInside} pixels differ inside the ${nearTotal} near-zero ones`);
  });
}
