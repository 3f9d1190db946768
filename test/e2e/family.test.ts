// Every single-level family variant end to end through the real CLI and sidecar (decode, the sidecar's preprocess
// at the variant's input size, the engine, the TypeScript post-process): `detect --json` on each fixture's
// input.png equals its detections.json at 0.5 and 0.3, on the cpu engine (tt-host: Nano). The checkpoints are the
// seed-1 synthetic ones (the ctest fixture synth_family's directory, made here when absent); the fixtures are
// ../shared/fixtures/rfdetr-family (or RFDETR_FAMILY_FIXTURES); without them each test skips
// (skip-or-fail, test/helpers/skip.ts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { execa } from 'execa';
import { packageRoot, synthBinary } from '../../src/config/paths.ts';
import { runBin } from '../cli/helpers.ts';
import { skipOrFail } from '../helpers/skip.ts';

const familyDir = process.env.RFDETR_FAMILY_FIXTURES || path.resolve(packageRoot, '..', 'shared', 'fixtures', 'rfdetr-family');
const weightsRoot = path.join(packageRoot, 'sidecar', 'build', 'test-weights', 'family');
// The engines' fp32 parity (C++ family tests): scores within 2e-5 of the reference, boxes within 1e-6 normalised.
const SCORE_TOL = 1e-4;
const BOX_TOL_PX = 0.05;

interface RefDet { query: number; label: number; label_name: string; score: number; box_xyxy: number[] }
interface Line { detections: { label: string; label_id: number; score: number; box: number[] }[]; num_detections: number; input_size: number[] }

async function weightsFor(variant: string): Promise<string> {
  const dir = path.join(weightsRoot, `${variant}-seed-0x1`);
  if (!fs.existsSync(path.join(dir, 'model.safetensors'))) {
    await execa(synthBinary(), ['--seed', '1', '--variant', variant, '--out', dir, '--quiet']);
  }
  return dir;
}

const fixturesSkip = fs.existsSync(familyDir) ? null : `no family fixtures at ${familyDir} (set RFDETR_FAMILY_FIXTURES)`;

// tt-host end to end on Nano only: the path around the engine is the cpu rows' at every size, and tt-host's own
// detections at 0.5 and 0.3 at every size are the ctest TtHostFamily cases' (against the same fixtures); Small to
// Large here took ~70 s of CI.
const RUNS: [string, string[]][] = [['cpu', ['nano', 'small', 'medium', 'large']], ['tt-host', ['nano']]];
for (const [engine, variants] of RUNS) {
  for (const variant of variants) {
    test(`e2e family: detect --engine ${engine} on ${variant}'s fixture equals its detections.json at 0.5 and 0.3`, async (t) => {
      if (fixturesSkip) return skipOrFail(t, fixturesSkip);
      const weights = await weightsFor(variant);
      const c = path.join(familyDir, variant, 'case-1');
      const ref = JSON.parse(fs.readFileSync(path.join(c, 'detections.json'), 'utf8')) as { resolution: number; detections: Record<string, RefDet[]> };
      const r = await runBin(['detect', '--json', '--engine', engine, '--weights', weights, '--threshold', '0.3', '--max-detections', '300', path.join(c, 'input.png')], { timeoutMs: 300_000 });
      assert.equal(r.code, 0, r.stderr);
      const line = JSON.parse(r.stdout.trim()) as Line;
      assert.deepEqual(line.input_size, [ref.resolution, ref.resolution], `${variant}: the input size the detect line reports`);
      for (const thr of ['0.3', '0.5']) {
        const want = ref.detections[thr]!;
        const got = line.detections.filter((d) => d.score > Number(thr));
        assert.equal(got.length, want.length, `${variant} ${engine} at ${thr}: detection count`);
        got.forEach((d, i) => {
          const w = want[i]!;
          assert.equal(d.label_id, w.label, `${variant} #${i} label`);
          assert.ok(Math.abs(d.score - w.score) <= SCORE_TOL, `${variant} #${i} score ${d.score} vs ${w.score}`);
          d.box.forEach((v, k) => assert.ok(Math.abs(v - w.box_xyxy[k]!) <= BOX_TOL_PX, `${variant} #${i} box[${k}] ${v} vs ${w.box_xyxy[k]}`));
        });
      }
    });
  }
}
