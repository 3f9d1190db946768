// What validating a /predict request against the one schema (ajv over schema.ts) costs, against the JSON.parse
// of the same request's body that express does anyway (the baseline, measured in the same run). Medians of 15
// batches. Writes bench/validate/results.json.
import fs from 'node:fs';
import path from 'node:path';
import { parsePredictBatchJson, parsePredictJson, parsePredictParams } from '../../src/http/params.ts';

const image = Buffer.alloc(420_000, 7).toString('base64'); // a typical 640x480 photo's JPEG, as base64
const body = JSON.stringify({ image, threshold: 0.3, max_detections: 50, classes: ['cat', 17], return_image: 'png' });
const batch = { images: Array.from({ length: 16 }, () => 'AAAA'), threshold: 0.3 };

function medianUs(n: number, f: () => void): number {
  const per: number[] = [];
  for (let b = 0; b < 15; b++) {
    const t0 = performance.now();
    for (let i = 0; i < n; i++) f();
    per.push(((performance.now() - t0) / n) * 1000);
  }
  per.sort((a, b) => a - b);
  return per[7]!;
}

const results = {
  json_parse_of_the_body_us: medianUs(50, () => JSON.parse(body)),
  validate_json_request_us: medianUs(20_000, () => parsePredictJson({ image, threshold: 0.3, max_detections: 50, classes: ['cat', 17], return_image: 'png' })),
  validate_text_fields_us: medianUs(20_000, () => parsePredictParams({ threshold: '0.3', max_detections: '50', classes: 'cat,17' }, true)),
  validate_batch_of_16_us: medianUs(20_000, () => parsePredictBatchJson({ ...batch })),
  reject_with_422_us: medianUs(2_000, () => {
    try {
      parsePredictJson({ image, threshold: 3 });
    } catch {}
  }),
};
const ratio = results.validate_json_request_us / results.json_parse_of_the_body_us;
const out = { ...results, validate_over_json_parse: ratio, node: process.version, date: new Date().toISOString() };
console.log(out);
fs.writeFileSync(path.join(import.meta.dirname, 'results.json'), `${JSON.stringify(out, null, 2)}\n`);
