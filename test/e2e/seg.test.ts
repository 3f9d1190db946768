// Every RF-DETR Seg fixture size end to end through the real CLI, server and sidecar (decode, the sidecar's
// preprocess, the engine with its mask head, the row selection, the TypeScript postprocess and mask encoding):
// on each fixture's input.png, `detect --json` (cpu; tt-host on Nano) and `/predict` (cpu) give the fixture's
// per-query-max detections (labels, scores within 1e-4, boxes within 1e-2 px) at 0.5 and 0.3, and each
// detection's served COCO RLE mask, decoded by the tests' own decoder (test/helpers/coco-rle-codec.ts), equals the
// golden mask of upstream rfdetr 1.11.2 exactly outside the pixels whose upsampled logit is within 1e-3 of 0
// (the fixture's `mask_near_zero.pixels`), with IoU ≥ 0.99 each and ≥ 0.995 on average. The checkpoints are the
// seed-1 synthetic ones (rfdetr-synth --variant seg-<size>); the fixtures are ../shared/fixtures/rfdetr-seg (or
// RFDETR_SEG_FIXTURES); without them each test skips (skip-or-fail, test/helpers/skip.ts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { execa } from 'execa';
import { packageRoot, synthBinary } from '../../src/config/paths.ts';
import { runBin } from '../cli/helpers.ts';
import { compareMasks, decodeRle, type Bitmap } from '../helpers/coco-rle-codec.ts';
import { startServe } from '../helpers/serve-child.ts';
import { skipOrFail } from '../helpers/skip.ts';

const segDir = process.env.RFDETR_SEG_FIXTURES || path.resolve(packageRoot, '..', 'shared', 'fixtures', 'rfdetr-seg');
const weightsRoot = path.join(packageRoot, 'sidecar', 'build', 'test-weights', 'seg');
const SCORE_TOL = 1e-4;
const BOX_TOL_PX = 1e-2;
const SIZES = ['nano', 'small', 'medium', 'large'] as const;

interface Rle { size: [number, number]; counts: string | number[] }
interface RefContract { query: number; label: number; score: number; box_xyxy: number[] }
interface RefDet { query: number; mask: Rle; mask_near_zero: { pixels: Rle } }
interface Ref {
  resolution: number;
  detections: Record<string, RefDet[]>;
  contract_per_query_max: Record<string, RefContract[]>;
}
interface Served { label_id: number; score: number; box: number[]; mask?: Rle }

async function weightsFor(size: string): Promise<string> {
  const dir = path.join(weightsRoot, `seg-${size}-seed-0x1`);
  if (!fs.existsSync(path.join(dir, 'model.safetensors'))) {
    await execa(synthBinary(), ['--seed', '1', '--variant', `seg-${size}`, '--out', dir, '--quiet']);
  }
  return dir;
}

const fixturesSkip = fs.existsSync(segDir) ? null : `no Seg fixtures at ${segDir} (set RFDETR_SEG_FIXTURES)`;

function reference(size: string): { ref: Ref; png: string } {
  const c = path.join(segDir, size, 'case-1');
  // Written by Python's json, which emits bare Infinity and NaN (in margin fields this test does not read).
  const text = fs.readFileSync(path.join(c, 'detections.json'), 'utf8').replace(/-?\bInfinity\b|\bNaN\b/g, 'null');
  return { ref: JSON.parse(text) as Ref, png: path.join(c, 'input.png') };
}

/** Checks `served` (everything above 0.3, best first) against the fixture at both thresholds. */
function checkAgainstFixture(what: string, ref: Ref, served: Served[]): void {
  // A query's mask does not depend on its label: upstream's flattened list holds it under any of its labels.
  const goldenMask = new Map<number, { mask: Bitmap; nearZero: Bitmap }>();
  for (const d of ref.detections['0.3']!) {
    if (!goldenMask.has(d.query)) goldenMask.set(d.query, { mask: decodeRle(d.mask), nearZero: decodeRle(d.mask_near_zero.pixels) });
  }
  for (const thr of ['0.3', '0.5']) {
    const want = ref.contract_per_query_max[thr]!;
    const got = served.filter((d) => d.score > Number(thr));
    assert.equal(got.length, want.length, `${what} at ${thr}: detection count`);
    let iouSum = 0;
    got.forEach((d, i) => {
      const w = want[i]!;
      assert.equal(d.label_id, w.label, `${what} #${i} label`);
      assert.ok(Math.abs(d.score - w.score) <= SCORE_TOL, `${what} #${i} score ${d.score} vs ${w.score}`);
      d.box.forEach((v, k) => assert.ok(Math.abs(v - w.box_xyxy[k]!) <= BOX_TOL_PX, `${what} #${i} box[${k}] ${v} vs ${w.box_xyxy[k]}`));
      assert.ok(d.mask && typeof d.mask.counts === 'string', `${what} #${i}: a COCO RLE mask with a compressed counts string, got ${JSON.stringify(d.mask)?.slice(0, 80)}`);
      const g = goldenMask.get(w.query);
      assert.ok(g, `${what} #${i}: the fixture has no mask for query ${w.query}`);
      const m = compareMasks(decodeRle(d.mask), g.mask, g.nearZero);
      assert.equal(m.differOutside, 0, `${what} #${i} (query ${w.query}): ${m.differOutside} mask pixels differ from the golden outside the near-zero set (IoU ${m.iou})`);
      assert.ok(m.iou >= 0.99, `${what} #${i} (query ${w.query}): mask IoU ${m.iou} < 0.99`);
      iouSum += m.iou;
    });
    if (got.length) assert.ok(iouSum / got.length >= 0.995, `${what} at ${thr}: mean mask IoU ${iouSum / got.length} < 0.995`);
  }
}

// tt-host end to end on Nano only: the path around the engine (decode, preprocess at the size's resolution, the row
// selection, postprocess, masks) is the cpu rows' at every size, and tt-host's own masks and detections at every size
// are the ctest TtHostSeg.*Fp32 cases' (against the same fixtures); Small to Large here took ~130 s of CI.
const RUNS: [string, readonly string[]][] = [['cpu', SIZES], ['tt-host', ['nano']]];
for (const [engine, sizes] of RUNS) {
  for (const size of sizes) {
    test(`e2e seg: detect --json --engine ${engine} on seg-${size}'s fixture equals its detections and masks at 0.5 and 0.3`, async (t) => {
      if (fixturesSkip) return skipOrFail(t, fixturesSkip);
      const { ref, png } = reference(size);
      const weights = await weightsFor(size);
      const r = await runBin(['detect', '--json', '--engine', engine, '--weights', weights, '--threshold', '0.3', '--max-detections', '300', png], { timeoutMs: 600_000 });
      assert.equal(r.code, 0, r.stderr);
      const line = JSON.parse(r.stdout.trim()) as { detections: Served[]; input_size: number[] };
      assert.deepEqual(line.input_size, [ref.resolution, ref.resolution], `seg-${size}: the input size the detect line reports`);
      checkAgainstFixture(`seg-${size} ${engine} detect`, ref, line.detections);
    });
  }
}

test('e2e seg: /predict on the cpu engine serves every Seg size\'s fixture detections and masks at 0.5 and 0.3', async (t) => {
  if (fixturesSkip) return skipOrFail(t, fixturesSkip);
  for (const size of SIZES) {
    const { ref, png } = reference(size);
    const weights = await weightsFor(size);
    const serve = await startServe(t, ['--engine', 'cpu', '--weights', weights]);
    try {
      const res = await fetch(`${serve.base}/predict?threshold=0.3&max_detections=300`, { method: 'POST', headers: { 'content-type': 'image/png' }, body: fs.readFileSync(png) });
      const body = await res.text();
      assert.equal(res.status, 200, body.slice(0, 400));
      checkAgainstFixture(`seg-${size} /predict`, ref, (JSON.parse(body) as { detections: Served[] }).detections);
    } finally {
      if (serve.child.exitCode === null) {
        const exited = new Promise((r) => serve.child.once('exit', r));
        serve.child.kill('SIGTERM');
        await exited;
      }
    }
  }
});
