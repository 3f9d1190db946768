// `rfdetr verify`: an engine against a reference engine on the three fixture images with the same checkpoint,
// both postprocessed with the TypeScript postprocess the server uses. Per image: the detection-IoU (reference
// as truth: each reference detection's best same-label IoU, mean × 100), max-abs / PCC of logits and boxes, and
// the top-100 overlap of the logits with the reference's and (synthetic checkpoint) with the fp32 golden. Three
// checks, by what is compared (the per-stage taps are not on the protocol: only head outputs are compared):
//   - an accelerator (tt, tt-host) against cpu fp32: exit 1 below the mean detection-IoU --gate (98.5);
//   - `--engine cpu --precision P` (a reduced precision) against cpu fp32: the held-order gates of
//     verify-held.ts (logits PCC >= 0.999, top-100 >= 95, per case); detection-IoU and the end-to-end top-100
//     are reported (on the synthetic weights every quantised run lands near 45/100: the cpu README, "int8");
//   - `--against ENGINE[:P]` (e.g. tt-host bf16 against cpu:bf16, the card's plan against the CPU's bf16):
//     reported; gated only on a --gate given.
//
// Without --weights/--model the checkpoint is the seed-1 synthetic one the fixtures were made with (generated
// into a temporary directory); a cpu fp32 reference is then also checked against the fixtures' recorded outputs.
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
import { maxAbsDiff, pcc, top100Overlap } from '../../src/detect/compare.ts';
import { HELD_PCC_GATE, HELD_TOP100_GATE, heldFailures, runHeldOrder, type HeldReport } from './verify-held.ts';
import { familyVariants, runFamily } from './verify-family.ts';
import { printVerify, type VerifyReport } from './verify-report.ts';
import { VERIFY_GATE } from './verify.ts';

const CASES = ['case-1', 'case-2', 'case-3'];
const fixturesDir = path.join(testFixturesDir, 'rfdetr-synth');

export interface VerifyFlags extends EngineFlags {
  /** Absent: VERIFY_GATE for an accelerator against cpu fp32, no detection-IoU gate otherwise. */
  gate?: number;
  threshold: number;
  json?: boolean;
  /** ENGINE[:PRECISION]: the reference instead of cpu at fp32. */
  against?: string;
  /** The precision check on the family fixtures too (verify-family.ts). */
  family?: boolean;
}

export type VerifyMode = 'accelerator' | 'precision' | 'against';
interface EngineRef { engine: string; precision?: string | undefined }

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

/** `--against ENGINE[:PRECISION]`. */
export function parseAgainst(text: string): EngineRef {
  const m = /^([a-z0-9-]+)(?::([a-z0-9]+))?$/.exec(text.trim());
  if (!m) throw new RfdetrError('E_USAGE', `--against: expected ENGINE or ENGINE:PRECISION (e.g. cpu:bf16) but received ${JSON.stringify(text)}`);
  return { engine: m[1]!, precision: m[2] };
}

/** What verify checks for these flags, after each engine and precision is checked against this build. */
async function planOf(ctx: CliContext, f: VerifyFlags & { engine: string }): Promise<{ mode: VerifyMode; reference: EngineRef; gate: number | undefined }> {
  const plan = await modeOf(ctx, f);
  if (f.family && plan.mode !== 'precision') {
    throw new RfdetrError('E_USAGE', '--family checks a reduced cpu precision on the family fixtures: it goes with --engine cpu --precision P (and no --against)');
  }
  if (f.family) familyVariants(ctx.env);
  return plan;
}

async function modeOf(ctx: CliContext, f: VerifyFlags & { engine: string }): Promise<{ mode: VerifyMode; reference: EngineRef; gate: number | undefined }> {
  const facts = await checkEngine(ctx, f.engine, f.precision);
  const precision = f.precision ?? facts?.defaultPrecision;
  if (f.against !== undefined) {
    const ref = parseAgainst(f.against);
    const refFacts = await checkEngine(ctx, ref.engine, ref.precision);
    if (ref.engine === f.engine && (ref.precision ?? refFacts?.defaultPrecision) === precision) {
      throw new RfdetrError('E_USAGE', `--against ${f.against}: that is the engine under test (${f.engine}${precision ? ` ${precision}` : ''}) itself; name another engine or precision`);
    }
    return { mode: 'against', reference: ref, gate: f.gate };
  }
  if (f.engine === 'cpu') {
    if (precision === undefined || precision === 'fp32') {
      const others = facts ? facts.precisions.filter((p) => p !== 'fp32') : [];
      throw new RfdetrError('E_USAGE', `verify --engine cpu checks a reduced precision against the cpu engine's fp32, but --precision is ${precision ?? 'fp32'}: pass --precision ${others.join('|') || 'P'} (what this build's cpu engine runs besides fp32), or --against ENGINE[:P] to compare cpu with another engine`);
    }
    return { mode: 'precision', reference: { engine: 'cpu' }, gate: f.gate };
  }
  return { mode: 'accelerator', reference: { engine: 'cpu' }, gate: f.gate ?? VERIFY_GATE };
}

export async function runVerify(ctx: CliContext, given: Omit<VerifyFlags, 'engine'> & { engine?: string }): Promise<void> {
  const f = { ...given, engine: given.engine ?? (await defaultEngine(ctx)) };
  const plan = await planOf(ctx, f);
  const synthetic = f.weights === undefined && f.model === undefined && f.revision === undefined;
  if (!synthetic) return verifyWith(ctx, f, plan, (await weightsFor(ctx, f)).dir, false);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'rfdetr-verify-'));
  try {
    stderrLine(ctx)('verify: no --weights: generating the seed-1 synthetic checkpoint the fixtures were made with');
    const s = await runSynth({ seed: 1n, out: tmp, env: ctx.env });
    await verifyWith(ctx, f, plan, s.dir, true);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

async function verifyWith(ctx: CliContext, f: VerifyFlags & { engine: string }, plan: Awaited<ReturnType<typeof planOf>>, weightsDir: string, synthetic: boolean): Promise<void> {
  const log = stderrLine(ctx);
  const cases: CaseInput[] = [];
  for (const name of CASES) cases.push({ name, image: await decodeImage(fs.readFileSync(path.join(fixturesDir, name, 'input.png'))) });
  // The engine under test first: a build that cannot run it fails in seconds, before the slower reference.
  log(`verify: engine ${f.engine}${f.precision ? ` (${f.precision})` : ''}`);
  const engine = await openEngine(ctx, 'verify', backendRequest(ctx, f, weightsDir));
  // What each engine runs, as its hello says (the flag's, or the engine's default).
  const precision = engine.info?.precision ?? f.precision ?? null;
  const got = await runAll(engine, cases);
  const ref = plan.reference;
  log(`verify: reference engine ${ref.engine}${ref.precision ? ` (${ref.precision})` : ''}, ${weightsDir}`);
  const refBackend = await openEngine(ctx, 'verify', backendRequest(ctx, { ...f, engine: ref.engine, precision: ref.precision }, weightsDir));
  const info = refBackend.info;
  const refPrecision = info?.precision ?? ref.precision ?? null;
  const want = await runAll(refBackend, cases);
  const goldens = synthetic ? CASES.map((name) => SafetensorsFile.read(path.join(fixturesDir, name, 'golden.safetensors'))) : null;
  let goldenMaxAbs: number | null = null;
  if (goldens && ref.engine === 'cpu' && (refPrecision ?? 'fp32') === 'fp32') {
    // The reference itself, against the recorded reference outputs (seed 1 is the fixtures' checkpoint).
    goldenMaxAbs = Math.max(...goldens.map((g, i) => Math.max(maxAbsDiff(g.f32('logits'), want[i]!.logits), maxAbsDiff(g.f32('pred_boxes'), want[i]!.predBoxes))));
    log(`verify: cpu reference vs the fixtures' recorded outputs: max-abs ${goldenMaxAbs.toExponential(2)}`);
  }
  let held: HeldReport | null = null;
  if (plan.mode === 'precision') {
    log(`verify: cpu ${precision} against fp32 with fp32's proposal order held (rfdetr-accuracy)`);
    held = await runHeldOrder(ctx.env, { weightsDir, precision: precision!, fixturesDir, threads: f.threads });
  }
  const family = f.family ? (await runFamily(ctx.env, { precision: precision!, threads: f.threads, log })).map((c) => ({ ...c, held_failures: heldFailures(c) })) : null;
  const labels = info?.labels ?? [];
  const numQueries = info?.numQueries ?? 300;
  const numClasses = info?.numClasses ?? 91;
  const rows = cases.map((c, i) => {
    const det = (o: CaseOutput): Detection[] => postprocess({ logits: o.logits, predBoxes: o.predBoxes, numQueries, numClasses },
      { width: c.image.width, height: c.image.height, threshold: f.threshold, maxDetections: numQueries, labels });
    const r = want[i]!, g = got[i]!;
    const dr = det(r), dg = det(g);
    const h = held?.cases.find((x) => x.case === c.name);
    if (held && !h) throw new RfdetrError('E_INFERENCE', `verify: the held-order tool reported no ${c.name} (it reported ${held.cases.map((x) => x.case).join(', ')})`);
    return {
      case: c.name, detection_iou: detectionIou(dr, dg), cpu_detections: dr.length, engine_detections: dg.length,
      logits_max_abs: maxAbsDiff(r.logits, g.logits), boxes_max_abs: maxAbsDiff(r.predBoxes, g.predBoxes),
      logits_pcc: pcc(r.logits, g.logits), boxes_pcc: pcc(r.predBoxes, g.predBoxes),
      top100_vs_reference: top100Overlap(g.logits, r.logits),
      top100_vs_golden: goldens ? top100Overlap(g.logits, goldens[i]!.f32('logits')) : null,
      cpu_forward_ms: r.forwardMs, engine_forward_ms: g.forwardMs,
      ...(h ? { held_order: h.held_order, topk_same_set: h.topk_same_set, topk_same_rank: h.topk_same_rank, held_failures: heldFailures(h) } : {}),
    };
  });
  const mean = rows.reduce((s, r) => s + r.detection_iou, 0) / rows.length;
  const failures: string[] = [];
  if (plan.gate !== undefined && !(mean >= plan.gate)) failures.push(`mean detection-IoU ${mean.toFixed(2)} is below the ${plan.gate} gate`);
  for (const r of [...rows, ...(family ?? [])]) for (const w of r.held_failures ?? []) failures.push(`${r.case}: ${w}`);
  const report: VerifyReport = {
    mode: plan.mode, engine: f.engine, precision, against: `${ref.engine}${refPrecision ? `:${refPrecision}` : ''}`,
    weights: synthetic ? 'synthetic seed 1' : weightsDir, cpu_vs_fixtures_max_abs: goldenMaxAbs, threshold: f.threshold,
    gate: plan.gate ?? null, held_gates: held ? { logits_pcc: HELD_PCC_GATE, top100: HELD_TOP100_GATE } : null, held_kernels: held?.kernels ?? null,
    mean_detection_iou: mean, pass: failures.length === 0, failures, cases: rows, family,
  };
  printVerify(ctx, report, f.json === true);
  if (failures.length > 0) throw new VerifyFailure(`verify: engine ${f.engine}${precision ? ` (${precision})` : ''}: ${failures.join('; ')}`);
}
