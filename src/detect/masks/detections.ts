// The `mask` of each kept detection of a segmentation model (those with mask logits), in the requested format,
// made one detection at a time on one sampling grid per image: what the response carries, and never more than
// one detection's runs in memory besides the finished masks. The event loop gets a turn whenever a mask ends
// YIELD_AFTER_MS or more after the last turn: 100 ragged masks at 4000×3000 take 0.4–2.3 s
// (bench/masks/RESULTS.md), one of them 4–25 ms, and the server's probes must answer meanwhile.
import { setImmediate as turn } from 'node:timers/promises';
import { MaskEncoder, type Mask, type MaskFormat } from './encode.ts';
import { maskGrid } from './grid.ts';

const YIELD_AFTER_MS = 10;

/**
 * The masks of `detections` at the image size width × height, or undefined when there are none to make
 * (`none`, or a detection model: no detection has mask logits). A segmentation detection without logits is an
 * internal error naming it, never a silently missing mask.
 */
export async function detectionMasks(detections: readonly { maskLogits?: Float32Array; label: string; score: number }[], width: number, height: number, format: MaskFormat): Promise<Mask[] | undefined> {
  if (format === 'none' || !detections.some((d) => d.maskLogits)) return undefined;
  const encoders = new Map<number, MaskEncoder>();
  const out: Mask[] = [];
  let since = performance.now();
  for (const [i, d] of detections.entries()) {
    const logits = d.maskLogits;
    if (!logits) throw new Error(`masks: detection ${i} (${d.label} ${d.score}) has no mask logits while others have (an internal error)`);
    const side = Math.round(Math.sqrt(logits.length));
    if (side * side !== logits.length) throw new RangeError(`masks: detection ${i} has ${logits.length} mask logits, not a square plane`);
    let enc = encoders.get(side);
    if (!enc) encoders.set(side, (enc = new MaskEncoder(maskGrid(side, width, height), format)));
    out.push(enc.encode(logits));
    if (performance.now() - since >= YIELD_AFTER_MS && i + 1 < detections.length) {
      await turn();
      since = performance.now();
    }
  }
  return out;
}
