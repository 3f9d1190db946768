// `rfdetr smoke --url URL`: the reference app's smoke test against a running server. Waits up to --wait
// seconds for readiness, posts one image, checks the answer is a well-formed /predict response for that image
// (and matches --expect), prints ONE line on stdout — `PASS n=5 counts={"cat": 2, ...} ...` or
// `FAIL <reason>` — and exits 0 or 1. --out writes the full response JSON (also on a FAIL with a response).
import fs from 'node:fs';
import path from 'node:path';
import sharp from 'sharp';
import { RfdetrClient } from '../../src/client/client.ts';
import { defaultSmokeImage } from '../../src/config/paths.ts';
import type { PredictResponse } from '../../src/detect/pipeline.ts';
import { serverHasSyntheticWeights } from '../../src/weights/synthetic.ts';
import type { CliContext } from '../context.ts';
import { SmokeFailure } from '../failures.ts';

export interface SmokeFlags {
  url: string;
  wait: number;
  out?: string;
  image?: string;
  expect?: Map<string, number>;
  threshold: number;
  minDetections: number;
}

/** Label → count, rendered as Python's json.dumps of a sorted dict (the reference smoke script's PASS line format). */
export function formatCounts(detections: readonly { label: string }[]): string {
  const counts = new Map<string, number>();
  for (const d of detections) counts.set(d.label, (counts.get(d.label) ?? 0) + 1);
  const keys = [...counts.keys()].sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}: ${counts.get(k)}`).join(', ')}}`;
}

/** Why `r` is not a well-formed /predict answer for an image of `width`x`height` at `threshold`, or null. */
export function responseProblem(r: PredictResponse, width: number, height: number, threshold: number): string | null {
  if (!Array.isArray(r.detections)) return 'response has no "detections" array';
  if (r.num_detections !== r.detections.length) return `num_detections is ${r.num_detections} but ${r.detections.length} detections came back`;
  if (r.image_size?.width !== width || r.image_size?.height !== height) {
    return `image_size is ${JSON.stringify(r.image_size)} but the image posted is ${width}x${height}`;
  }
  for (let i = 0; i < r.detections.length; i++) {
    const d = r.detections[i]!;
    const where = `detection ${i}`;
    if (typeof d.label !== 'string' || d.label === '') return `${where} has no label`;
    if (!Number.isInteger(d.label_id) || d.label_id < 0) return `${where} label_id ${JSON.stringify(d.label_id)} is not a class index`;
    if (typeof d.score !== 'number' || !(d.score > Math.fround(threshold)) || d.score > 1) return `${where} score ${JSON.stringify(d.score)} is not in (${threshold}, 1]`;
    if (i > 0 && d.score > r.detections[i - 1]!.score) return `detections are not sorted by score (descending) at ${i}`;
    const b = d.box;
    if (!Array.isArray(b) || b.length !== 4 || !b.every((v) => Number.isFinite(v))) return `${where} box ${JSON.stringify(b)} is not 4 finite numbers`;
    if (!(b[0] >= 0 && b[0] <= b[2] && b[2] <= width && b[1] >= 0 && b[1] <= b[3] && b[3] <= height)) {
      return `${where} box ${JSON.stringify(b)} is not [x1, y1, x2, y2] inside the ${width}x${height} image`;
    }
  }
  return null;
}

export async function runSmoke(ctx: CliContext, f: SmokeFlags): Promise<void> {
  const imagePath = path.resolve(ctx.cwd, f.image ?? defaultSmokeImage);
  let bytes: Buffer;
  try {
    bytes = fs.readFileSync(imagePath);
  } catch (e) {
    throw new SmokeFailure(`cannot read --image ${f.image ?? imagePath}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  let width: number, height: number;
  try {
    const meta = await sharp(bytes).metadata();
    width = meta.width;
    height = meta.height;
  } catch (e) {
    throw new SmokeFailure(`--image ${f.image ?? imagePath} is not a readable image: ${(e as Error).message}`);
  }
  const client = new RfdetrClient(f.url);
  try {
    const ready = await client.waitReady(f.wait);
    if (!ready.ready) throw new SmokeFailure(`${client.baseUrl.origin} not ready after ${f.wait} s: ${ready.detail}${f.wait === 0 ? ' (use --wait SECONDS to wait for it)' : ''}`);
    let r: PredictResponse;
    try {
      r = await client.predict(bytes, { threshold: f.threshold });
    } catch (e) {
      throw new SmokeFailure((e as Error).message);
    }
    if (f.out) fs.writeFileSync(path.resolve(ctx.cwd, f.out), `${JSON.stringify(r)}\n`);
    const problem = responseProblem(r, width, height, f.threshold);
    if (problem) throw new SmokeFailure(`malformed response: ${problem}`);
    const counts = formatCounts(r.detections);
    if (f.expect) {
      const got = new Map<string, number>();
      for (const d of r.detections) got.set(d.label, (got.get(d.label) ?? 0) + 1);
      const wrong = [...f.expect].filter(([l, n]) => (got.get(l) ?? 0) !== n).map(([l, n]) => `${l}:${n} (got ${got.get(l) ?? 0})`);
      if (wrong.length) throw new SmokeFailure(`expected ${wrong.join(', ')}; n=${r.num_detections} counts=${counts}`);
    }
    if (r.num_detections < f.minDetections) {
      throw new SmokeFailure(`n=${r.num_detections} detections, expected at least ${f.minDetections} (--min-detections) on ${path.basename(imagePath)}`);
    }
    const top = r.detections[0];
    const synthetic = serverHasSyntheticWeights(await client.info().catch(() => undefined));
    if (synthetic) ctx.stderr.write(`WARNING: ${client.baseUrl.origin} serves SYNTHETIC weights (its /info says so): detections are meaningless\n`);
    ctx.stdout.write(`PASS n=${r.num_detections} counts=${counts}${top ? ` top=${top.label}:${top.score.toFixed(3)}` : ''} total_ms=${r.timing_ms?.total?.toFixed(1) ?? '?'} url=${client.baseUrl.origin}${synthetic ? ' (synthetic weights: detections are meaningless)' : ''}\n`);
  } finally {
    await client.close().catch(() => {});
  }
}
