// Copies the small golden outputs of the shared rfdetr-synth fixtures into test/fixtures, so a fresh clone
// can run the end-to-end parity tests: input.png, detections.json and a golden.safetensors holding only
// pixel_values, logits, pred_boxes and two_stage.topk_indices. Large per-stage tensors stay in ../shared.
// Usage: npx tsx scripts/extract-golden.ts [SHARED_FIXTURES_DIR]
import fs from 'node:fs';
import path from 'node:path';
import { sharedFixturesDir, testFixturesDir } from '../src/config/paths.ts';
import { SafetensorsFile, encodeSafetensors } from '../src/weights/safetensors.ts';

const KEEP = ['pixel_values', 'logits', 'pred_boxes', 'two_stage.topk_indices'];
const src = process.argv[2] ?? sharedFixturesDir();
const dst = path.join(testFixturesDir, 'rfdetr-synth');
for (const name of fs.readdirSync(src).filter((n) => /^case-\d+$/.test(n)).sort()) {
  const from = path.join(src, name);
  const to = path.join(dst, name);
  fs.mkdirSync(to, { recursive: true });
  for (const f of ['input.png', 'detections.json']) fs.copyFileSync(path.join(from, f), path.join(to, f));
  const g = SafetensorsFile.read(path.join(from, 'golden.safetensors'));
  const tensors = KEEP.map((k) => ({ ...g.entry(k), data: g.raw(k) }));
  fs.writeFileSync(path.join(to, 'golden.safetensors'), encodeSafetensors(tensors, { ...g.header.metadata, extracted_from: `rfdetr-synth/${name}/golden.safetensors`, keys: KEEP.join(',') }));
  console.log(`${name}: ${tensors.map((t) => `${t.name}${JSON.stringify(t.shape)}`).join(' ')}`);
}
for (const f of ['config.json']) fs.copyFileSync(path.join(src, f), path.join(dst, f));
