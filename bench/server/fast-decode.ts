// What `fast_decode` changes (bench, not a test): for JPEGs made from the fixture images at photo sizes, the
// 560×560 pixel_values of the exact path (full decode, the sidecar's resize) against the fast path (DCT-scaled
// decode + sharp's linear resize to 560, the sidecar's resize then being 560→560), through the sidecar's own
// preprocess (bench/preprocess's pixel-values, built here); the decode's CPU time on both paths; and the detections
// of the real cpu engine on both (synthetic seed-1 weights unless --weights: the detections are then a fixed
// function of the pixels, not meaningful objects, so they measure how far the change moves the output).
//   node --import tsx bench/server/fast-decode.ts [--weights DIR] [--out FILE]
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { sharedFixturesDir, testFixturesDir } from '../../src/config/paths.ts';
import { decodeImage, type RgbImage } from '../../src/image/decode.ts';
import { detectDecoded, type DetectResult } from '../../src/detect/pipeline.ts';
import { boxIou } from '../../src/detect/iou.ts';
import { createBackend, silentLogger } from '../../src/sidecar/index.ts';
import { synthWeights } from '../../test/helpers/synth-weights.ts';
import { SafetensorsFile } from '../../src/weights/safetensors.ts';

const here = path.dirname(fileURLToPath(import.meta.url));
const { values } = parseArgs({ options: { weights: { type: 'string' }, out: { type: 'string' } } });
const outFile = values.out ?? path.join(here, 'fast-decode.json');
const SIZE = 560;
const STD = [0.229, 0.224, 0.225];

const prep = path.join(here, '..', 'preprocess');
execFileSync('cmake', ['-S', prep, '-B', path.join(prep, 'build'), '-G', 'Ninja', '-DCMAKE_BUILD_TYPE=Release'], { stdio: ['ignore', 'ignore', 'inherit'] });
execFileSync('cmake', ['--build', path.join(prep, 'build'), '--target', 'pixel-values'], { stdio: ['ignore', 'ignore', 'inherit'] });
const tool = path.join(prep, 'build', 'pixel-values');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'rfdetr-fast-decode-'));

function pixelValues(img: RgbImage): Float32Array {
  fs.writeFileSync(path.join(tmp, 'in.rgb'), img.data);
  execFileSync(tool, [String(img.width), String(img.height), path.join(tmp, 'in.rgb'), path.join(tmp, 'out.f32'), String(SIZE)]);
  const b = fs.readFileSync(path.join(tmp, 'out.f32'));
  return new Float32Array(b.buffer, b.byteOffset, b.length / 4);
}

/** PSNR in the [0, 1] pixel domain (pixel_values × std undoes the normalisation's scale), and the max |Δ| in pixel_values. */
function compare(a: Float32Array, b: Float32Array): { psnr_db: number; max_abs: number } {
  const plane = a.length / 3;
  let se = 0;
  let max = 0;
  for (let i = 0; i < a.length; i++) {
    const d = a[i]! - b[i]!;
    max = Math.max(max, Math.abs(d));
    const p = d * STD[Math.floor(i / plane)]!;
    se += p * p;
  }
  return { psnr_db: Math.round(100 * 10 * Math.log10(1 / (se / a.length))) / 100, max_abs: Math.round(1e4 * max) / 1e4 };
}

async function cpuMs(f: () => Promise<unknown>, runs = 5): Promise<number> {
  const xs: number[] = [];
  for (let i = 0; i < runs; i++) {
    const c0 = process.cpuUsage();
    await f();
    const c = process.cpuUsage(c0);
    xs.push((c.user + c.system) / 1000);
  }
  xs.sort((x, y) => x - y);
  return Math.round(100 * xs[xs.length >> 1]!) / 100;
}

const sources: Array<[string, string]> = ['case-1', 'case-2', 'case-3'].map((c) => [c, path.join(testFixturesDir, 'rfdetr-synth', c, 'input.png')]);
for (const v of ['nano', 'small', 'medium', 'large']) {
  const f = path.join(sharedFixturesDir(), 'rfdetr-family', v, 'case-1', 'input.png');
  if (fs.existsSync(f)) sources.push([`family-${v}`, f]);
}

const weights = values.weights ?? (await synthWeights());
const backend = createBackend({ engine: 'cpu', weightsDir: weights, threads: 0, logger: silentLogger });
await backend.ready(300_000);
const run = (img: RgbImage): Promise<DetectResult> => {
  const t0 = performance.now();
  return detectDecoded((input, o) => backend.infer(input, o), backend.info, img, { threshold: 0.5, max_detections: 100 }, { t0, decodeMs: 0 });
};

/** How two runs' detections agree: matched by label at IoU ≥ 0.5, and how far the scores moved. */
function agreement(a: DetectResult, b: DetectResult) {
  const pairs = a.detections.map((x) => [x, b.detections.find((y) => y.label_id === x.label_id && boxIou(x.box, y.box) >= 0.5)] as const);
  const matched = pairs.filter(([, y]) => y);
  return {
    count: [a.detections.length, b.detections.length],
    matched: matched.length,
    max_score_diff_matched: matched.length ? Math.round(1e4 * Math.max(...matched.map(([x, y]) => Math.abs(x.score - y!.score)))) / 1e4 : null,
  };
}

// The default path on the fixtures: decodeImage + the sidecar's preprocess against the reference's pixel_values.
const defaultPath: Record<string, boolean> = {};
for (const c of ['case-1', 'case-2', 'case-3']) {
  const dir = path.join(testFixturesDir, 'rfdetr-synth', c);
  const golden = SafetensorsFile.read(path.join(dir, 'golden.safetensors')).f32('pixel_values');
  const pv = pixelValues(await decodeImage(fs.readFileSync(path.join(dir, 'input.png'))));
  defaultPath[c] = pv.length === golden.length && pv.every((v, i) => Object.is(v, golden[i]));
  console.log(`${c}: pixel_values ${defaultPath[c] ? 'bit-identical to the reference' : 'DIFFER from the reference'}`);
}

const rows: Array<Record<string, unknown>> = [];
try {
  for (const [name, file] of sources) {
    const png = fs.readFileSync(file);
    for (const [w, h] of [[4000, 3000], [2400, 1800], [1920, 1080]] as const) {
      // A photo-sized JPEG of the fixture, with mild noise so it is not unrealistically smooth after upscaling.
      const jpg = await sharp(png).resize(w, h, { fit: 'fill', kernel: 'cubic' }).sharpen({ sigma: 1 }).jpeg({ quality: 90 }).toBuffer();
      const exact = await decodeImage(jpg, { thread: false });
      const fast = await decodeImage(jpg, { fastDecode: { size: SIZE } });
      // The yardstick for how far a pixel change moves this model's output: the same picture at JPEG q91.
      const other = await decodeImage(await sharp(png).resize(w, h, { fit: 'fill', kernel: 'cubic' }).sharpen({ sigma: 1 }).jpeg({ quality: 91 }).toBuffer());
      const pvExact = pixelValues(exact);
      const de = await run(exact);
      const vs = async (img: RgbImage) => {
        const d = await run(img);
        return { pixel_values: compare(pvExact, pixelValues(img)), detections: agreement(de, d) };
      };
      const row = {
        image: `${name} as ${w}x${h} JPEG q90`, bytes: jpg.length,
        fast_applies: fast.source !== undefined,
        decoded_fast: `${fast.width}x${fast.height} from ${w}x${h}`,
        decode_cpu_ms: { exact: await cpuMs(() => decodeImage(jpg, { thread: false })), fast: await cpuMs(() => decodeImage(jpg, { fastDecode: { size: SIZE } })) },
        fast_vs_exact: await vs(fast),
        q91_vs_exact: await vs(other),
      };
      rows.push(row);
      console.log(`${row.image}: fast ${row.fast_applies ? 'applies' : 'does not apply'}; PSNR fast ${row.fast_vs_exact.pixel_values.psnr_db} dB / q91 ${row.q91_vs_exact.pixel_values.psnr_db} dB; decode CPU ${row.decode_cpu_ms.exact} → ${row.decode_cpu_ms.fast} ms; detections ${JSON.stringify(row.fast_vs_exact.detections)} (q91: ${JSON.stringify(row.q91_vs_exact.detections)})`);
    }
  }
} finally {
  await backend.close();
  fs.rmSync(tmp, { recursive: true, force: true });
}
fs.writeFileSync(outFile, JSON.stringify({
  date: new Date().toISOString(),
  host: `${os.cpus()[0]?.model} x${os.availableParallelism()}, load avg ${os.loadavg().map((x) => x.toFixed(1)).join(' ')}`,
  fixtures_pixel_values_bit_identical: defaultPath,
  engine: backend.info?.engine, weights: values.weights ? values.weights : 'synthetic seed 1 (detections are a function of the pixels, not objects)',
  rows,
}, null, 2) + '\n');
console.log(`wrote ${outFile}`);
