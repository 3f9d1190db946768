// `rfdetr verify --engine tt|tt-host`: the accelerator card check. Runs the given engine and the CPU
// engine (the numerical reference) on the three fixture images with the same checkpoint, postprocesses both
// with the TypeScript postprocess the server uses, and prints per image the detection-IoU (CPU as reference:
// each CPU detection's best same-label IoU, mean × 100) and max-abs / PCC of logits and boxes. Exit 1 when the
// mean detection-IoU is below --gate (98.5, the port's gate). Per-stage taps are not on the protocol: only
// the head outputs are compared.
//
// Without --weights/--model the checkpoint is the seed-1 synthetic one the fixtures were made with (generated
// into a temporary directory); the CPU reference is then also checked against the fixtures' recorded outputs.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { testFixturesDir } from '../../src/config/paths.ts';
import { RfdetrError } from '../../src/errors.ts';
import { detectionIou } from '../../src/detect/iou.ts';
import { postprocess, type Detection } from '../../src/detect/postprocess.ts';
import { decodeImage, type RgbImage } from '../../src/image/decode.ts';
import { runSynth } from '../../src/weights/synth.ts';
import { SafetensorsFile } from '../../src/weights/safetensors.ts';
import type { InferenceBackend } from '../../src/sidecar/backend.ts';
import { stderrLine, type CliContext } from '../context.ts';
import { builtEngines, checkEngine } from '../engine-check.ts';
import type { EngineFlags } from '../engine-flags.ts';
import { backendRequest, openEngine, weightsFor } from '../engine-start.ts';
import { VerifyFailure } from '../failures.ts';
import { maxAbsDiff, pcc } from '../../src/detect/compare.ts';

const CASES = ['case-1', 'case-2', 'case-3'];

export interface VerifyFlags extends EngineFlags {
  gate: number;
  threshold: number;
  json?: boolean;
}

interface CaseInput { name: string; image: RgbImage }
interface CaseOutput { logits: Float32Array; predBoxes: Float32Array; forwardMs: number }

async function runAll(backend: InferenceBackend, cases: readonly CaseInput[]): Promise<CaseOutput[]> {
  const out: CaseOutput[] = [];
  try {
    for (const c of cases) {
      const r = await backend.infer({ image: c.image });
      out.push({ logits: r.outputs.logits!, predBoxes: r.outputs.pred_boxes!, forwardMs: r.forwardMs });
    }
  } finally {
    await backend.close();
  }
  return out;
}

/** Without --engine: tt where this build has it, else tt-host (the TT graph on the CPU), never one it lacks. */
async function defaultEngine(ctx: CliContext): Promise<string> {
  const built = await builtEngines(ctx);
  const pick = built === null || built.includes('tt') ? 'tt' : 'tt-host';
  if (built !== null && !built.includes(pick)) {
    throw new RfdetrError('E_USAGE', `verify: this build has no accelerator engine to check (built: ${built.join(', ') || 'none'}); pass --engine NAME`);
  }
  if (pick !== 'tt') stderrLine(ctx)(`verify: no --engine and this build has no tt engine (built: ${built!.join(', ')}): checking tt-host`);
  return pick;
}

export async function runVerify(ctx: CliContext, given: Omit<VerifyFlags, 'engine'> & { engine?: string }): Promise<void> {
  const f: VerifyFlags = { ...given, engine: given.engine ?? (await defaultEngine(ctx)) };
  await checkEngine(ctx, f.engine, f.precision);
  const synthetic = f.weights === undefined && f.model === undefined && f.revision === undefined;
  if (!synthetic) return verifyWith(ctx, f, (await weightsFor(ctx, f)).dir, false);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'rfdetr-verify-'));
  try {
    stderrLine(ctx)('verify: no --weights: generating the seed-1 synthetic checkpoint the fixtures were made with');
    const s = await runSynth({ seed: 1n, out: tmp, env: ctx.env });
    await verifyWith(ctx, f, s.dir, true);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

async function verifyWith(ctx: CliContext, f: VerifyFlags, weightsDir: string, synthetic: boolean): Promise<void> {
  const log = stderrLine(ctx);
  const w = { dir: weightsDir };
  const cases: CaseInput[] = [];
  for (const name of CASES) {
    const img = await decodeImage(fs.readFileSync(path.join(testFixturesDir, 'rfdetr-synth', name, 'input.png')));
    cases.push({ name, image: img });
  }
  // The engine under test first: a build that cannot run it fails in seconds, before the slower reference.
  log(`verify: engine ${f.engine}${f.precision ? ` (${f.precision})` : ''}`);
  const engine = await openEngine(ctx, 'verify', backendRequest(ctx, f, w.dir));
  // What the engine runs, as its hello says (the flag's, or the engine's default).
  const precision = engine.info?.precision ?? f.precision ?? null;
  const got = await runAll(engine, cases);
  log(`verify: reference engine cpu, ${w.dir}`);
  const cpuBackend = await openEngine(ctx, 'verify', backendRequest(ctx, { ...f, engine: 'cpu', precision: undefined }, w.dir));
  const info = cpuBackend.info;
  const ref = await runAll(cpuBackend, cases);
  let goldenMaxAbs: number | null = null;
  if (synthetic) {
    // The reference itself, against the recorded reference outputs (seed 1 is the fixtures' checkpoint).
    goldenMaxAbs = Math.max(...CASES.map((name, i) => {
      const g = SafetensorsFile.read(path.join(testFixturesDir, 'rfdetr-synth', name, 'golden.safetensors'));
      return Math.max(maxAbsDiff(g.f32('logits'), ref[i]!.logits), maxAbsDiff(g.f32('pred_boxes'), ref[i]!.predBoxes));
    }));
    log(`verify: cpu reference vs the fixtures' recorded outputs: max-abs ${goldenMaxAbs.toExponential(2)}`);
  }
  const labels = info?.labels ?? [];
  const numQueries = info?.numQueries ?? 300;
  const numClasses = info?.numClasses ?? 91;
  const rows = cases.map((c, i) => {
    const det = (o: CaseOutput): Detection[] => postprocess({ logits: o.logits, predBoxes: o.predBoxes, numQueries, numClasses },
      { width: c.image.width, height: c.image.height, threshold: f.threshold, maxDetections: numQueries, labels });
    const r = ref[i]!, g = got[i]!;
    const dr = det(r), dg = det(g);
    return {
      case: c.name, detection_iou: detectionIou(dr, dg), cpu_detections: dr.length, engine_detections: dg.length,
      logits_max_abs: maxAbsDiff(r.logits, g.logits), boxes_max_abs: maxAbsDiff(r.predBoxes, g.predBoxes),
      logits_pcc: pcc(r.logits, g.logits), boxes_pcc: pcc(r.predBoxes, g.predBoxes),
      cpu_forward_ms: r.forwardMs, engine_forward_ms: g.forwardMs,
    };
  });
  const mean = rows.reduce((s, r) => s + r.detection_iou, 0) / rows.length;
  const pass = mean >= f.gate;
  if (f.json) {
    ctx.stdout.write(`${JSON.stringify({ engine: f.engine, precision, weights: synthetic ? 'synthetic seed 1' : w.dir, cpu_vs_fixtures_max_abs: goldenMaxAbs, threshold: f.threshold, gate: f.gate, mean_detection_iou: mean, pass, cases: rows })}\n`);
  } else {
    const out = (s: string) => void ctx.stdout.write(`${s}\n`);
    out(`verify: engine ${f.engine}${precision ? ` (${precision})` : ''} against cpu; weights ${synthetic ? 'synthetic seed 1 (the fixtures\' checkpoint)' : w.dir}; threshold ${f.threshold}`);
    out(`  ${'case'.padEnd(7)} ${'det-IoU'.padStart(8)} ${'n cpu/eng'.padStart(10)} ${'logits max|d|'.padStart(14)} ${'boxes max|d|'.padStart(13)} ${'logits PCC'.padStart(11)} ${'boxes PCC'.padStart(11)} ${'fwd ms cpu/eng'.padStart(16)}`);
    for (const r of rows) {
      out(`  ${r.case.padEnd(7)} ${r.detection_iou.toFixed(2).padStart(8)} ${`${r.cpu_detections}/${r.engine_detections}`.padStart(10)} ${r.logits_max_abs.toExponential(2).padStart(14)} ${r.boxes_max_abs.toExponential(2).padStart(13)} ${r.logits_pcc.toFixed(6).padStart(11)} ${r.boxes_pcc.toFixed(6).padStart(11)} ${`${r.cpu_forward_ms.toFixed(0)}/${r.engine_forward_ms.toFixed(0)}`.padStart(16)}`);
    }
    out(`${pass ? 'PASS' : 'FAIL'} mean detection-IoU ${mean.toFixed(2)} ${pass ? '>=' : '<'} gate ${f.gate}`);
  }
  if (!pass) throw new VerifyFailure(`verify: engine ${f.engine} mean detection-IoU ${mean.toFixed(2)} is below the ${f.gate} gate`);
}
