// Each Seg size's case-1 through the product's pipeline (detectDecoded: postprocess, the select sent, each kept
// detection's mask-logit row, the masks of the response), with a scripted segment model replaying the golden
// logits, pred_boxes and mask logits (test/helpers/scripted-backend.ts, the sidecar's selection rule): every
// served mask, decoded by the tests' own COCO decoder, equals upstream's mask of the same query
// (../shared/fixtures/rfdetr-seg detections.json) outside its near-zero pixels, and its counts string equals
// pycocotools' where no pixel differs; with mask_format=polygon the contours cover the same pixels (plus holes);
// with mask_format=none no select is sent and no detection has a mask.
import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import { detectDecoded, type DetectParams } from '../../../src/detect/pipeline.ts';
import type { RgbImage } from '../../../src/image/decode.ts';
import type { InferInput, InferOptions, InferResult, SidecarInfo } from '../../../src/sidecar/backend.ts';
import { SafetensorsFile } from '../../../src/weights/safetensors.ts';
import { countsFromString, countsToString, decodeCounts } from '../../helpers/coco-rle-codec.ts';
import { filled, rasterize } from '../../helpers/mask-bitmaps.ts';
import { ScriptedBackend } from '../../helpers/scripted-backend.ts';
import { SEG_SIZES, hasSegFixture, readSegCase, segCaseDir, segFixturesDir } from '../../helpers/seg-fixtures.ts';
import { testSidecarInfo } from '../../helpers/sidecar-info.ts';
import { skipOrFail } from '../../helpers/skip.ts';

const RES = { nano: 312, small: 384, medium: 432, large: 504 } as const;

class GoldenSegment extends ScriptedBackend {
  info: SidecarInfo;
  selects: (InferOptions['select'])[] = [];
  constructor(private readonly size: keyof typeof RES, private readonly logits: Float32Array, private readonly boxes: Float32Array, private readonly planes: Map<number, Float32Array>, q: number) {
    super();
    const r = RES[size];
    this.info = testSidecarInfo({
      protocolVersion: 4, sidecarVersion: 't', engine: 'golden', device: 'host', inputShape: [3, r, r], numQueries: q, numClasses: 91, labels: [], variant: `seg-${size}`, task: 'segment',
    });
  }
  async infer(_input: InferInput, opts: InferOptions = {}): Promise<InferResult> {
    this.selects.push(opts.select);
    const m = RES[this.size] / 4;
    // A query whose plane the golden does not store: an empty mask (its detection is not compared).
    const empty = new Float32Array(m * m).fill(-1);
    const out = this.headOutputs({ logits: this.logits, predBoxes: this.boxes, maskOf: (q) => this.planes.get(q) ?? empty }, opts);
    return { ...out, preprocessMs: 0, forwardMs: 0, transferMs: 0 };
  }
  async close(): Promise<void> {}
  destroy(): void {}
}

for (const size of SEG_SIZES) {
  test(`seg-${size} case-1 through detectDecoded: served masks equal upstream's (rle, polygon), none sends no select`, async (t) => {
    if (!hasSegFixture(size)) return skipOrFail(t, `no rfdetr-seg fixtures at ${segFixturesDir} (set RFDETR_SEG_FIXTURES)`);
    const c = readSegCase(size);
    const st = SafetensorsFile.read(path.join(segCaseDir(size), 'golden.safetensors'));
    const logits = st.f32('logits');
    const model = new GoldenSegment(size, logits, st.f32('pred_boxes'), c.planes, logits.length / 91);
    const image: RgbImage = { width: c.width, height: c.height, data: new Uint8Array(c.width * c.height * 3) };
    const run = (params: DetectParams) => detectDecoded((input, o) => model.infer(input, o), model.info, image, params, { t0: performance.now(), decodeMs: 0 });
    const wantOf = new Map(c.detections.map((d) => [d.query, d]));
    const rle = await run({ threshold: 0.3, max_detections: 300, mask_format: 'rle' });
    const poly = await run({ threshold: 0.3, max_detections: 300, mask_format: 'polygon' });
    let compared = 0;
    rle.response.detections.forEach((d, i) => {
      const q = rle.detections[i]!.query;
      const want = wantOf.get(q);
      assert.ok(d.mask && !Array.isArray(d.mask), `detection ${i} (query ${q}) has no RLE mask`);
      if (!want || !c.planes.has(q)) return;
      const got = decodeCounts(countsFromString(d.mask.counts), c.height, c.width);
      const exp = decodeCounts(want.mask.counts, c.height, c.width);
      const near = decodeCounts(want.mask_near_zero.pixels.counts, c.height, c.width);
      let differ = 0;
      for (let p = 0; p < got.length; p++) if (got[p] !== exp[p] && !near[p]) differ++;
      assert.equal(differ, 0, `query ${q}: ${differ} pixels differ outside the near-zero set`);
      if (got.every((v, p) => v === exp[p])) assert.equal(d.mask.counts, countsToString(want.mask.counts), `query ${q}`);
      const polys = poly.response.detections[i]!.mask;
      assert.ok(Array.isArray(polys), `query ${q}: polygon format`);
      // Rasterized contours = the mask and its holes (compared column-major).
      assert.deepEqual(rasterize(polys, c.width, c.height), filled(got, c.width, c.height), `query ${q}: polygons`);
      compared++;
    });
    assert.ok(compared >= 10, `only ${compared} served masks had a stored golden plane`);
    const none = await run({ threshold: 0.3, max_detections: 300, mask_format: 'none' });
    assert.equal(model.selects.at(-1), undefined, 'mask_format none sends no select');
    assert.ok(none.response.detections.length > 0 && none.response.detections.every((d) => !('mask' in d)));
    t.diagnostic(`${compared} of ${rle.response.detections.length} served masks compared with upstream's`);
  });
}
