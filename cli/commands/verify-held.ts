// `rfdetr verify --engine cpu --precision P`'s held-order check (issue 34): the reduced precision against fp32
// with fp32's top-k proposal order held, so that near-tied proposal scores changing rank (which moves whole
// decoder rows: every quantised run, ours and the peers', lands near 45/100 end to end on the synthetic
// weights) do not hide the arithmetic's own error. The forwards run in `rfdetr-accuracy` (sidecar/tools), a
// separate process on the cpu model's test hook (set_topk_override): that hook stays off the protocol the
// server speaks, so no client can ask a served engine for another ranking. Gates per case: logits PCC >= 0.999
// and top-100 overlap >= 95, both against fp32 in held order.
import fs from 'node:fs';
import { execa } from 'execa';
import { accuracyBinary } from '../../src/config/paths.ts';
import { RfdetrError } from '../../src/errors.ts';

export const HELD_PCC_GATE = 0.999;
export const HELD_TOP100_GATE = 95;

export interface HeldComparison {
  top100_vs_fp32: number;
  logits_pcc: number | null;
  logits_max_abs: number | null;
  boxes_pcc: number | null;
  boxes_max_abs: number | null;
}
export interface HeldCase {
  case: string;
  queries: number;
  /** Of fp32's Q proposals, how many the reduced precision's own two-stage also selects / at the same rank. */
  topk_same_set: number;
  topk_same_rank: number;
  end_to_end: HeldComparison;
  held_order: HeldComparison;
}
export interface HeldReport { tool: string; precision: string; threads: number; kernels: string; variant: string; cases: HeldCase[] }

/** Runs rfdetr-accuracy on the fixture directory; the tool's own message when it fails. */
export async function runHeldOrder(env: NodeJS.ProcessEnv, o: { weightsDir: string; precision: string; fixturesDir: string; threads?: number | undefined }): Promise<HeldReport> {
  const binary = accuracyBinary(env);
  if (!fs.existsSync(binary)) {
    throw new RfdetrError('E_INFERENCE', `verify: the held-order accuracy tool ${binary} does not exist; build it with \`npm run build:sidecar\` (or point RFDETR_ACCURACY at it)`);
  }
  const args = ['--weights', o.weightsDir, '--precision', o.precision, '--threads', String(o.threads ?? 0), '--fixtures', o.fixturesDir];
  const r = await execa(binary, args, { env, extendEnv: false, reject: false, stdin: 'ignore', encoding: 'utf8' });
  if (r.failed) {
    const how = r.exitCode !== undefined ? `exited with code ${r.exitCode}` : `failed (${r.signal ?? r.shortMessage})`;
    throw new RfdetrError('E_INFERENCE', `verify: ${binary} ${args.join(' ')} ${how}: ${r.stderr.trim().split('\n').slice(-5).join(' | ') || '(no output)'}`);
  }
  let rep: HeldReport;
  try {
    rep = JSON.parse(r.stdout) as HeldReport;
  } catch {
    throw new RfdetrError('E_INFERENCE', `verify: ${binary} printed no JSON object (expected one line {"tool":"rfdetr-accuracy",...}): ${r.stdout.slice(0, 200)}`);
  }
  if (!Array.isArray(rep.cases) || rep.precision !== o.precision) {
    throw new RfdetrError('E_INFERENCE', `verify: ${binary} answered for precision ${JSON.stringify(rep.precision)} with ${Array.isArray(rep.cases) ? rep.cases.length : 'no'} cases; expected ${o.precision} and a "cases" array`);
  }
  return rep;
}

/** The held-order gates one case misses, as text; empty when it passes. */
export function heldFailures(c: HeldCase): string[] {
  const why: string[] = [];
  const p = c.held_order.logits_pcc;
  if (p === null || !(p >= HELD_PCC_GATE)) why.push(`held-order logits PCC ${p === null ? 'not finite' : p.toFixed(6)} < ${HELD_PCC_GATE}`);
  if (!(c.held_order.top100_vs_fp32 >= HELD_TOP100_GATE)) why.push(`held-order top-100 ${c.held_order.top100_vs_fp32} < ${HELD_TOP100_GATE}`);
  return why;
}
