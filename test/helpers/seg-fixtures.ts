// The rfdetr-seg golden fixtures (../shared/fixtures/rfdetr-seg, or RFDETR_SEG_FIXTURES): each size's case-1
// detections (upstream's PostProcess at 0.3, which holds the 0.5 list) with the mask logits of the queries the
// golden stores (`pred_masks` [1, Q, M, M] in full, or `pred_masks_sel` for the queries in
// `pred_masks_sel_queries`).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { SafetensorsFile } from '../../src/weights/safetensors.ts';

const packageRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
export const segFixturesDir = process.env.RFDETR_SEG_FIXTURES || path.resolve(packageRoot, '..', 'shared', 'fixtures', 'rfdetr-seg');
export const SEG_SIZES = ['nano', 'small', 'medium', 'large'] as const;

export interface CocoRle {
  size: [number, number];
  counts: number[];
}

export interface SegDetection {
  query: number;
  label: number;
  score: number;
  mask: CocoRle;
  mask_model_res: CocoRle;
  mask_near_zero: { pixels: CocoRle; count: number; count_model_res: number };
}

export interface SegCase {
  width: number;
  height: number;
  /** The mask side M (R/4). */
  side: number;
  detections: SegDetection[];
  /** The mask logits (f32 M×M) of each query the golden stores. */
  planes: Map<number, Float32Array>;
}

export function segCaseDir(size: string): string {
  return path.join(segFixturesDir, size, 'case-1');
}

export function hasSegFixture(size: string): boolean {
  return fs.existsSync(path.join(segCaseDir(size), 'golden.safetensors'));
}

export function readSegCase(size: string): SegCase {
  const dir = segCaseDir(size);
  // Python's json writes Infinity and NaN (e.g. an empty margin); JSON has no such tokens.
  const text = fs.readFileSync(path.join(dir, 'detections.json'), 'utf8').replace(/([:,[]\s*)-?(?:Infinity|NaN)\b/g, '$1null');
  const dets = JSON.parse(text) as {
    image: { width: number; height: number }; mask_resolution: number; detections: Record<string, SegDetection[]>;
  };
  const st = SafetensorsFile.read(path.join(dir, 'golden.safetensors'));
  const side = dets.mask_resolution;
  const planes = new Map<number, Float32Array>();
  const full = st.has('pred_masks');
  const all = st.f32(full ? 'pred_masks' : 'pred_masks_sel');
  const queries = full ? Array.from({ length: all.length / (side * side) }, (_, q) => q) : st.i64('pred_masks_sel_queries');
  queries.forEach((q, k) => planes.set(q, all.subarray(k * side * side, (k + 1) * side * side)));
  return { width: dets.image.width, height: dets.image.height, side, detections: dets.detections['0.3']!, planes };
}
