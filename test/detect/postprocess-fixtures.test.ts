import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { testFixturesDir } from '../../src/config/paths.ts';
import { postprocess } from '../../src/detect/postprocess.ts';
import { detectionIou } from '../../src/detect/iou.ts';
import { SafetensorsFile } from '../../src/weights/safetensors.ts';

interface FixtureDetection { query: number; label: number; label_name: string; score: number; logit: number; box_xyxy: number[] }

const CASES = ['case-1', 'case-2', 'case-3'];
const fixtureDir = path.join(testFixturesDir, 'rfdetr-synth');
const config = JSON.parse(fs.readFileSync(path.join(fixtureDir, 'config.json'), 'utf8')) as { id2label: Record<string, string> };
const labels: string[] = [];
for (const [id, name] of Object.entries(config.id2label)) labels[Number(id)] = name;

for (const name of CASES) {
  test(`postprocess: ${name} golden logits/pred_boxes -> detections.json at 0.5 and 0.3, bit-exact`, () => {
    const dir = path.join(fixtureDir, name);
    const golden = SafetensorsFile.read(path.join(dir, 'golden.safetensors'));
    const det = JSON.parse(fs.readFileSync(path.join(dir, 'detections.json'), 'utf8')) as {
      image: { width: number; height: number }; num_queries: number; num_classes: number; detections: Record<string, FixtureDetection[]>;
    };
    const logits = golden.f32('logits');
    const predBoxes = golden.f32('pred_boxes');
    for (const thr of ['0.5', '0.3']) {
      const want = det.detections[thr]!;
      assert.ok(want.length > 0);
      const got = postprocess({ logits, predBoxes, numQueries: det.num_queries, numClasses: det.num_classes },
        { width: det.image.width, height: det.image.height, threshold: Number(thr), maxDetections: 300, labels });
      assert.equal(got.length, want.length, `${name}@${thr}: count`);
      for (let i = 0; i < want.length; i++) {
        const w = want[i]!;
        const g = got[i]!;
        const where = `${name}@${thr} #${i} (query ${w.query})`;
        assert.equal(g.query, w.query, where);
        assert.equal(g.label_id, w.label, where);
        assert.equal(g.label, w.label_name, where);
        assert.equal(g.score, w.score, `${where}: score`);
        assert.deepEqual(g.box, w.box_xyxy, `${where}: box`);
        const q = w.query * 4;
        assert.deepEqual(g.box_cxcywh_norm, [predBoxes[q], predBoxes[q + 1], predBoxes[q + 2], predBoxes[q + 3]], `${where}: raw box`);
      }
      const ref = want.map((w) => ({ label_id: w.label, box: w.box_xyxy as [number, number, number, number] }));
      assert.equal(detectionIou(ref, got), 100, `${name}@${thr}: detection IoU with the fixture`);
      // dropping the best detection costs at most its share of the mean (another same-label box may overlap it)
      const without = detectionIou(ref, got.slice(1));
      assert.ok(without < 100 && without >= (100 * (ref.length - 1)) / ref.length - 1e-9, `${name}@${thr}: ${without}`);
    }
  });
}
