// The `mask` of each kept detection of a segmentation model (those with mask logits), in the requested format,
// made one detection at a time on one sampling grid per image: what the response carries, and never more than
// one detection's runs in memory besides the finished masks.
import { MaskEncoder, type Mask, type MaskFormat } from './encode.ts';
import { maskGrid } from './grid.ts';

/**
 * The masks of `detections` at the image size width × height, or undefined when there are none to make
 * (`none`, or a detection model: no detection has mask logits). A segmentation detection without logits is an
 * internal error naming it, never a silently missing mask.
 */
export function detectionMasks(detections: readonly { maskLogits?: Float32Array; label: string; score: number }[], width: number, height: number, format: MaskFormat): Mask[] | undefined {
  if (format === 'none' || !detections.some((d) => d.maskLogits)) return undefined;
  const encoders = new Map<number, MaskEncoder>();
  return detections.map((d, i) => {
    const logits = d.maskLogits;
    if (!logits) throw new Error(`masks: detection ${i} (${d.label} ${d.score}) has no mask logits while others have (an internal error)`);
    const side = Math.round(Math.sqrt(logits.length));
    if (side * side !== logits.length) throw new RangeError(`masks: detection ${i} has ${logits.length} mask logits, not a square plane`);
    let enc = encoders.get(side);
    if (!enc) encoders.set(side, (enc = new MaskEncoder(maskGrid(side, width, height), format)));
    return enc.encode(logits);
  });
}
