import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { testFixturesDir } from '../../src/config/paths.ts';
import { decodeImage } from '../../src/image/decode.ts';
import { preprocess, INPUT_SIZE } from '../../src/image/preprocess.ts';
import { SafetensorsFile } from '../../src/weights/safetensors.ts';

const CASES = ['case-1', 'case-2', 'case-3'];

for (const name of CASES) {
  test(`preprocess: ${name} input.png -> pixel_values is bit-exact with the golden`, async (t) => {
    const dir = path.join(testFixturesDir, 'rfdetr-synth', name);
    const img = await decodeImage(fs.readFileSync(path.join(dir, 'input.png')));
    const golden = SafetensorsFile.read(path.join(dir, 'golden.safetensors'));
    assert.deepEqual(golden.entry('pixel_values').shape, [1, 3, INPUT_SIZE, INPUT_SIZE]);
    const want = golden.f32('pixel_values');
    const got = preprocess(img);
    assert.equal(got.length, want.length);
    let maxAbs = 0;
    let differing = 0;
    for (let i = 0; i < want.length; i++) {
      const d = Math.abs(got[i]! - want[i]!);
      if (!(d === 0)) differing++;
      if (!(d <= maxAbs)) maxAbs = d;
    }
    t.diagnostic(`${name} ${img.width}x${img.height}: max-abs ${maxAbs}, ${differing} of ${want.length} values differ`);
    assert.equal(differing, 0, `${differing} values differ, max-abs ${maxAbs} (required <= 1e-5, aim 0)`);
    // Reusing an output buffer gives the same values and returns that buffer.
    const out = new Float32Array(want.length).fill(Number.NaN);
    assert.equal(preprocess(img, out), out);
    assert.deepEqual(out, got);
  });
}
