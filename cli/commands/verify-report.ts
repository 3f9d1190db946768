// What `rfdetr verify` prints: one JSON object (--json) or a table per check, then PASS/FAIL (or REPORT when
// nothing is gated) with every gate missed.
import type { CliContext } from '../context.ts';
import type { HeldCase, HeldComparison } from './verify-held.ts';
import type { VerifyMode } from './verify-run.ts';

export interface VerifyCase {
  case: string;
  detection_iou: number;
  /** Detections of the reference (cpu unless --against) and of the engine under test. */
  cpu_detections: number;
  engine_detections: number;
  logits_max_abs: number;
  boxes_max_abs: number;
  logits_pcc: number;
  boxes_pcc: number;
  top100_vs_reference: number;
  /** Against the fixtures' fp32 golden logits; null when the checkpoint is not the fixtures' (--weights). */
  top100_vs_golden: number | null;
  cpu_forward_ms: number;
  engine_forward_ms: number;
  /** The precision check only (verify-held.ts). */
  held_order?: HeldComparison;
  topk_same_set?: number;
  topk_same_rank?: number;
  held_failures?: string[];
}

export interface VerifyReport {
  mode: VerifyMode;
  engine: string;
  precision: string | null;
  /** The reference, ENGINE:PRECISION as its hello says. */
  against: string;
  weights: string;
  cpu_vs_fixtures_max_abs: number | null;
  threshold: number;
  /** The mean detection-IoU gate; null: reported, not gated. */
  gate: number | null;
  held_gates: { logits_pcc: number; top100: number } | null;
  held_kernels: string | null;
  mean_detection_iou: number;
  pass: boolean;
  failures: string[];
  cases: VerifyCase[];
  /** --family: the held-order check on each family fixture (VARIANT/case-1); null without it. */
  family: (HeldCase & { held_failures: string[] })[] | null;
}

const fixed = (x: number | null | undefined, d: number): string => (x === null || x === undefined || !Number.isFinite(x) ? String(x) : x.toFixed(d));

export function printVerify(ctx: CliContext, r: VerifyReport, json: boolean): void {
  if (json) {
    ctx.stdout.write(`${JSON.stringify(r)}\n`);
    return;
  }
  const out = (s: string) => void ctx.stdout.write(`${s}\n`);
  out(`verify: engine ${r.engine}${r.precision ? ` (${r.precision})` : ''} against ${r.against}; weights ${r.weights === 'synthetic seed 1' ? 'synthetic seed 1 (the fixtures\' checkpoint)' : r.weights}; threshold ${r.threshold}`);
  out(`  ${'case'.padEnd(7)} ${'det-IoU'.padStart(8)} ${'n ref/eng'.padStart(10)} ${'logits max|d|'.padStart(14)} ${'boxes max|d|'.padStart(13)} ${'logits PCC'.padStart(11)} ${'boxes PCC'.padStart(11)} ${'top100 ref/golden'.padStart(18)} ${'fwd ms ref/eng'.padStart(16)}`);
  for (const c of r.cases) {
    out(`  ${c.case.padEnd(7)} ${c.detection_iou.toFixed(2).padStart(8)} ${`${c.cpu_detections}/${c.engine_detections}`.padStart(10)} ${c.logits_max_abs.toExponential(2).padStart(14)} ${c.boxes_max_abs.toExponential(2).padStart(13)} ${fixed(c.logits_pcc, 6).padStart(11)} ${fixed(c.boxes_pcc, 6).padStart(11)} ${`${c.top100_vs_reference}/${c.top100_vs_golden ?? '-'}`.padStart(18)} ${`${c.cpu_forward_ms.toFixed(0)}/${c.engine_forward_ms.toFixed(0)}`.padStart(16)}`);
  }
  if (r.held_gates) {
    out(`held order (fp32's top-k proposals injected; ${r.held_kernels} kernels): gates logits PCC >= ${r.held_gates.logits_pcc}, top-100 >= ${r.held_gates.top100}`);
    out(`  ${'case'.padEnd(13)} ${'top100'.padStart(7)} ${'logits PCC'.padStart(11)} ${'logits max|d|'.padStart(14)} ${'boxes max|d|'.padStart(13)} ${'proposals same set/rank'.padStart(24)}  end-to-end top100 vs fp32`);
    const held = (name: string, h: HeldComparison, same: string, e2e: number) =>
      out(`  ${name.padEnd(13)} ${String(h.top100_vs_fp32).padStart(7)} ${fixed(h.logits_pcc, 6).padStart(11)} ${fixed(h.logits_max_abs, 3).padStart(14)} ${fixed(h.boxes_max_abs, 3).padStart(13)} ${same.padStart(24)}  ${e2e} (reported, not gated)`);
    for (const c of r.cases) held(c.case, c.held_order!, `${c.topk_same_set}/${c.topk_same_rank}`, c.top100_vs_reference);
    for (const c of r.family ?? []) held(c.case, c.held_order, `${c.topk_same_set}/${c.topk_same_rank}`, c.end_to_end.top100_vs_fp32);
  }
  const iou = `mean detection-IoU ${r.mean_detection_iou.toFixed(2)}`;
  if (r.pass && r.gate === null && r.held_gates === null) out(`REPORT ${iou} (not gated: pass --gate to gate it)`);
  else if (r.pass) out(`PASS ${r.gate !== null ? `${iou} >= gate ${r.gate}` : `${iou} (reported)`}${r.held_gates ? '; held-order gates hold on every case' : ''}`);
  else {
    const gateMissed = r.gate !== null && !(r.mean_detection_iou >= r.gate);
    const held = [...r.cases, ...(r.family ?? [])].flatMap((c) => (c.held_failures ?? []).map((w) => `${c.case}: ${w}`));
    out(`FAIL ${[...(gateMissed ? [`${iou} < gate ${r.gate}`] : []), ...held].join('; ')}`);
  }
}
