// The mask postprocess of a segmentation response: 100 detections' masks made from their mask logits
// (src/detect/masks/detections.ts: the streamed, output-sensitive upsample into the RLE encoder or the polygon
// tracer), on a 1920×1080 and a 4000×3000 image, with the golden mask logits of the rfdetr-seg fixtures (SegNano's
// 100 planes of 78², SegLarge's 20 stored planes of 126² repeated 5 times). Per case, in a child process of its
// own so its peak RSS is its own: the median ms for 100 masks over --runs, and the growth of the peak RSS
// (getrusage maxrss) from before the first mask to after the last, against what one byte per pixel of K×H×W
// would take; then the peak's growth for K = 10, 100 and 300 detections (does it grow with K?). Baseline, same run: the plain way (each detection upsampled into a float H×W image, thresholded,
// scanned into RLE counts; one image at a time, not K×H×W), on 10 of the 100 detections, scaled to 100.
//
//   node --expose-gc --import tsx bench/masks/bench.ts [--runs 5] [--out bench/masks/results.json]
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { detectionMasks } from '../../src/detect/masks/detections.ts';
import { axisTable } from '../../src/detect/masks/grid.ts';
import { rleToString } from '../../src/detect/masks/rle.ts';
import { SafetensorsFile } from '../../src/weights/safetensors.ts';
import { median, r2 } from '../stats.ts';

const here = path.dirname(fileURLToPath(import.meta.url));
const fixtures = process.env.RFDETR_SEG_FIXTURES || path.resolve(here, '..', '..', '..', 'shared', 'fixtures', 'rfdetr-seg');
const arg = (name: string, dflt: string) => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1]! : dflt;
};

interface Case { image: [number, number]; planes: 'nano' | 'large'; format: 'rle' | 'polygon' | 'plain'; k?: number }

function planesOf(size: 'nano' | 'large', k: number): { side: number; planes: Float32Array[] } {
  const st = SafetensorsFile.read(path.join(fixtures, size, 'case-1', 'golden.safetensors'));
  const key = st.has('pred_masks') ? 'pred_masks' : 'pred_masks_sel';
  const shape = st.entry(key).shape;
  const side = shape[2]!;
  const all = st.f32(key);
  const n = all.length / (side * side);
  const planes = Array.from({ length: k }, (_, q) => all.slice((q % n) * side * side, ((q % n) + 1) * side * side));
  return { side, planes };
}

/** The plain way, one detection: a float H×W image of the upsampled logits, > 0, scanned column-major into counts. */
function plainRle(L: Float32Array, M: number, w: number, h: number): string {
  const ax = axisTable(M, w), ay = axisTable(M, h);
  const img = new Float32Array(w * h);
  for (let y = 0; y < h; y++) {
    const i0 = ay.i0[y]!, i1 = Math.min(i0 + 1, M - 1), ly = ay.lambda[y]!, my = ay.mu[y]!;
    for (let x = 0; x < w; x++) {
      const j0 = ax.i0[x]!, j1 = Math.min(j0 + 1, M - 1), lx = ax.lambda[x]!, mx = ax.mu[x]!;
      img[y * w + x] = (L[i0 * M + j0]! * mx + L[i0 * M + j1]! * lx) * my + (L[i1 * M + j0]! * mx + L[i1 * M + j1]! * lx) * ly;
    }
  }
  const counts: number[] = [];
  let v = 0, run = 0;
  for (let x = 0; x < w; x++) for (let y = 0; y < h; y++) {
    const b = img[y * w + x]! > 0 ? 1 : 0;
    if (b === v) run++;
    else { counts.push(run); run = 1; v = b; }
  }
  counts.push(run);
  return rleToString(counts);
}

async function child(c: Case, runs: number): Promise<object> {
  const { side, planes } = planesOf(c.planes, c.k ?? 100);
  const [w, h] = c.image;
  const dets = planes.map((p, k) => ({ label: 'x', score: 1 - k / 1000, maskLogits: p }));
  globalThis.gc?.();
  const rss0 = process.resourceUsage().maxRSS;
  const times: number[] = [];
  let outBytes = 0;
  for (let r = 0; r < runs; r++) {
    const t = performance.now();
    if (c.format === 'plain') {
      const out = dets.slice(0, 10).map((d) => plainRle(d.maskLogits, side, w, h));
      times.push((performance.now() - t) * 10);
      outBytes = JSON.stringify(out).length * 10;
    } else {
      const out = (await detectionMasks(dets, w, h, c.format))!;
      times.push(((performance.now() - t) * 100) / dets.length);
      outBytes = JSON.stringify(out).length;
    }
  }
  const growthKiB = process.resourceUsage().maxRSS - rss0;
  return { ...c, side, runs, k: dets.length, ms_per_100: r2(median(times)), ms_min: r2(Math.min(...times)), peak_rss_growth_mib: r2(growthKiB / 1024), khw_u8_mib: r2((100 * w * h) / 2 ** 20), khw_f32_mib: r2((400 * w * h) / 2 ** 20), json_kib: r2(outBytes / 1024) };
}

if (process.argv.includes('--child')) {
  const c = JSON.parse(arg('--child', '{}')) as Case;
  process.stdout.write(JSON.stringify(await child(c, Number(arg('--runs', '5')))));
} else {
  const runs = arg('--runs', '5');
  const out = arg('--out', path.join(here, 'results.json'));
  const rows: object[] = [];
  for (const image of [[1920, 1080], [4000, 3000]] as [number, number][]) {
    for (const planes of ['nano', 'large'] as const) {
      for (const format of ['rle', 'polygon', 'plain'] as const) {
        const c: Case = { image, planes, format };
        const text = execFileSync(process.execPath, ['--expose-gc', '--import', 'tsx', fileURLToPath(import.meta.url), '--child', JSON.stringify(c), '--runs', format === 'plain' ? '1' : runs], { encoding: 'utf8', maxBuffer: 1 << 26 });
        const row = JSON.parse(text) as Record<string, unknown>;
        rows.push(row);
        console.log(`${image.join('×')} ${planes} (${row.side}²) ${format.padEnd(7)} ${String(row.ms_per_100).padStart(8)} ms / 100 (min ${row.ms_min})  peak RSS +${row.peak_rss_growth_mib} MiB (K×H×W u8 ${row.khw_u8_mib} MiB)  json ${row.json_kib} KiB`);
      }
    }
  }
  const byKey = (i: string, p: string, f: string) => rows.find((r) => { const x = r as Case; return x.image.join('x') === i && x.planes === p && x.format === f; }) as { ms_per_100: number } | undefined;
  for (const i of ['1920x1080', '4000x3000']) for (const p of ['nano', 'large']) {
    const plain = byKey(i, p, 'plain')!.ms_per_100;
    console.log(`${i} ${p}: rle ${r2(byKey(i, p, 'rle')!.ms_per_100 / plain)}× and polygon ${r2(byKey(i, p, 'polygon')!.ms_per_100 / plain)}× the plain way's time`);
  }
  // Does the peak grow with the number of detections? The same masks, K = 10, 100, 300, one run each.
  for (const format of ['rle', 'polygon'] as const) {
    const growth = [10, 100, 300].map((k) => {
      const c: Case = { image: [4000, 3000], planes: 'nano', format, k };
      const row = JSON.parse(execFileSync(process.execPath, ['--expose-gc', '--import', 'tsx', fileURLToPath(import.meta.url), '--child', JSON.stringify(c), '--runs', '1'], { encoding: 'utf8', maxBuffer: 1 << 26 })) as Record<string, unknown>;
      rows.push(row);
      return `K=${k} +${row.peak_rss_growth_mib} MiB (json ${row.json_kib} KiB)`;
    });
    console.log(`4000x3000 nano ${format}, peak RSS growth by K: ${growth.join(', ')}`);
  }
  fs.writeFileSync(out, `${JSON.stringify({ date: new Date().toISOString(), loadavg: (await import('node:os')).loadavg(), runs: Number(runs), rows }, null, 1)}\n`);
  console.log(`wrote ${out}`);
}
