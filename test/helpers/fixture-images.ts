// The fixture cases as a test double recognises them: each case's input.png decoded once by the product's own
// decoder, so a backend double can tell which case an RGB image is (byte-equal) and answer with that case's
// recorded head outputs. An image that is no fixture case matches nothing, so a wrong decode fails the test.
import fs from 'node:fs';
import path from 'node:path';
import { testFixturesDir } from '../../src/config/paths.ts';
import { decodeImage, type RgbImage } from '../../src/image/decode.ts';
import { SafetensorsFile } from '../../src/weights/safetensors.ts';

export const FIXTURE_CASES = ['case-1', 'case-2', 'case-3'] as const;

export interface FixtureCase {
  name: string;
  image: RgbImage;
  pixelValues: Float32Array;
  logits: Float32Array;
  predBoxes: Float32Array;
}

let cases: Promise<FixtureCase[]> | undefined;
export function fixtureCases(): Promise<FixtureCase[]> {
  cases ??= Promise.all(FIXTURE_CASES.map(async (name) => {
    const dir = path.join(testFixturesDir, 'rfdetr-synth', name);
    const st = SafetensorsFile.read(path.join(dir, 'golden.safetensors'));
    return {
      name,
      image: await decodeImage(fs.readFileSync(path.join(dir, 'input.png'))),
      pixelValues: st.f32('pixel_values'),
      logits: st.f32('logits'),
      predBoxes: st.f32('pred_boxes'),
    };
  }));
  return cases;
}

const sameImage = (a: RgbImage, b: RgbImage) => a.width === b.width && a.height === b.height && Buffer.from(a.data).equals(Buffer.from(b.data));

/** The fixture case whose decoded input.png equals `image`, else undefined. */
export async function fixtureCaseOf(image: RgbImage): Promise<FixtureCase | undefined> {
  return (await fixtureCases()).find((c) => sameImage(c.image, image));
}
