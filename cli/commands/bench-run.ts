// `rfdetr bench`: latency of the engine (forward_ms, measured in the sidecar) and end to end (in process: the
// file through the same detector as `rfdetr detect`, so a plain JPEG/PNG is decoded by the sidecar as it is there;
// or the HTTP round trip with --url), p50/p90/p99 per stage, warm-up excluded;
// -n requests measured, --concurrency of them in flight at once. Prints a table (or --json) on stdout.
import fs from 'node:fs';
import path from 'node:path';
import { RfdetrClient } from '../../src/client/client.ts';
import { defaultSmokeImage } from '../../src/config/paths.ts';
import type { PredictTiming } from '../../src/detect/pipeline.ts';
import { DEFAULT_MAX_DETECTIONS, DEFAULT_THRESHOLD } from '../../src/detect/params-schema.ts';
import { stderrLine, type CliContext } from '../context.ts';
import type { EngineFlags } from '../engine-flags.ts';
import { inProcessDetector } from './detect-engine.ts';

export interface BenchFlags extends EngineFlags {
  n: number;
  warmup: number;
  concurrency: number;
  image?: string;
  url?: string;
  json?: boolean;
}

type Sample = PredictTiming & { wall: number };
const STAGES = ['inference', 'transfer', 'queue', 'decode', 'preprocess', 'postprocess', 'total', 'wall'] as const;

/** Nearest-rank percentile of sorted values. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))]!;
}

export interface StageStats { p50: number; p90: number; p99: number; mean: number }

export function stageStats(samples: readonly Sample[]): Record<(typeof STAGES)[number], StageStats> {
  const out = {} as Record<(typeof STAGES)[number], StageStats>;
  for (const k of STAGES) {
    const v = samples.map((s) => s[k]).sort((a, b) => a - b);
    out[k] = { p50: percentile(v, 50), p90: percentile(v, 90), p99: percentile(v, 99), mean: v.reduce((a, b) => a + b, 0) / Math.max(1, v.length) };
  }
  return out;
}

export async function runBench(ctx: CliContext, f: BenchFlags): Promise<void> {
  const log = stderrLine(ctx);
  const imagePath = path.resolve(ctx.cwd, f.image ?? defaultSmokeImage);
  const bytes = fs.readFileSync(imagePath);
  let one: () => Promise<PredictTiming>;
  let close: () => Promise<void>;
  let engineName: string;
  let precision: string | null = null;
  if (f.url !== undefined) {
    const client = new RfdetrClient(f.url);
    one = async () => (await client.predict(bytes)).timing_ms;
    close = () => client.close();
    engineName = `server ${client.baseUrl.origin}`;
  } else {
    const detector = await inProcessDetector(ctx, { ...f, threshold: DEFAULT_THRESHOLD, maxDetections: DEFAULT_MAX_DETECTIONS }, 'bench');
    let index = 0;
    one = async () => (await detector.detect({ data: { file: bytes }, index: index++, t0: performance.now() }, false)).response.timing_ms;
    close = () => detector.close();
    const info = detector.info;
    // What the engine runs, as its hello says (the flag's, or the engine's default).
    precision = info?.precision ?? f.precision ?? null;
    engineName = `${info?.engine ?? f.engine}${precision ? ` (${precision})` : ''} on ${info?.device ?? 'unknown device'}`;
  }
  const samples: Sample[] = [];
  let t0 = 0;
  let t1 = 0;
  try {
    for (let i = 0; i < f.warmup; i++) await one();
    log(`bench: ${f.warmup} warm-up request${f.warmup === 1 ? '' : 's'} done; measuring ${f.n} at concurrency ${f.concurrency}`);
    let next = 0;
    t0 = performance.now();
    const worker = async () => {
      while (next < f.n) {
        next++;
        const s = performance.now();
        const t = await one();
        samples.push({ ...t, queue: t.queue ?? 0, transfer: t.transfer ?? 0, wall: performance.now() - s });
      }
    };
    await Promise.all(Array.from({ length: f.concurrency }, worker));
    t1 = performance.now();
  } finally {
    await close().catch(() => {});
  }
  const stats = stageStats(samples);
  const throughput = samples.length / ((t1 - t0) / 1000);
  if (f.json) {
    ctx.stdout.write(`${JSON.stringify({ engine: engineName, precision, image: imagePath, n: samples.length, warmup: f.warmup, concurrency: f.concurrency, images_per_s: throughput, stages_ms: stats })}\n`);
    return;
  }
  const out = (s: string) => void ctx.stdout.write(`${s}\n`);
  out(`bench: ${engineName}; ${path.basename(imagePath)}; n=${samples.length} (warm-up ${f.warmup} excluded), concurrency ${f.concurrency}; ${throughput.toFixed(2)} images/s`);
  out(`  ${'stage (ms)'.padEnd(12)} ${'p50'.padStart(9)} ${'p90'.padStart(9)} ${'p99'.padStart(9)} ${'mean'.padStart(9)}`);
  const names: Record<(typeof STAGES)[number], string> = {
    inference: 'engine', transfer: 'transfer', queue: 'queue', decode: 'decode', preprocess: 'preprocess',
    postprocess: 'postprocess', total: f.url ? 'server e2e' : 'e2e', wall: f.url ? 'client e2e' : 'wall',
  };
  for (const k of STAGES) {
    const s = stats[k];
    out(`  ${names[k].padEnd(12)} ${[s.p50, s.p90, s.p99, s.mean].map((v) => v.toFixed(2).padStart(9)).join(' ')}`);
  }
}
