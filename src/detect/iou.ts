// Detection-level agreement between a reference and a candidate detection list (e.g. CPU oracle vs the
// Tenstorrent engine, or an engine vs the fixtures' detections.json): for each reference detection, the best IoU
// with any candidate detection of the same label; the mean over the reference, times 100.

export type Box = readonly [number, number, number, number];

export interface LabelledBox {
  label_id: number;
  /** [x1, y1, x2, y2] in pixels. */
  box: Box;
}

/**
 * IoU of two [x1, y1, x2, y2] boxes. Zero-area boxes (a box clamped against an image edge) have no area to
 * overlap, so two of them count as the same box (1) when every corner is within `degenerateTolPx`, else 0.
 */
export function boxIou(a: Box, b: Box, degenerateTolPx = 0.5): number {
  const areaA = Math.max(0, a[2] - a[0]) * Math.max(0, a[3] - a[1]);
  const areaB = Math.max(0, b[2] - b[0]) * Math.max(0, b[3] - b[1]);
  const iw = Math.min(a[2], b[2]) - Math.max(a[0], b[0]);
  const ih = Math.min(a[3], b[3]) - Math.max(a[1], b[1]);
  const inter = iw > 0 && ih > 0 ? iw * ih : 0;
  const union = areaA + areaB - inter;
  if (union > 0) return inter / union;
  return a.every((v, i) => Math.abs(v - b[i]!) <= degenerateTolPx) ? 1 : 0;
}

export interface IouMatch {
  /** Index into the reference list. */
  ref: number;
  /** Index of the best same-label candidate, or -1 when there is none. */
  got: number;
  iou: number;
}

/** Per reference detection: the best same-label IoU among `got` (0 when no candidate has that label). */
export function matchDetections(ref: readonly LabelledBox[], got: readonly LabelledBox[]): IouMatch[] {
  return ref.map((r, i) => {
    let best = -1;
    let bestIou = 0;
    for (let j = 0; j < got.length; j++) {
      const g = got[j]!;
      if (g.label_id !== r.label_id) continue;
      const iou = boxIou(r.box, g.box);
      if (best < 0 || iou > bestIou) {
        best = j;
        bestIou = iou;
      }
    }
    return { ref: i, got: best, iou: bestIou };
  });
}

/**
 * Mean over the reference detections of the best same-label IoU in `got`, times 100 (100 = every reference
 * box found exactly). An empty reference scores 100 when `got` is empty too, else 0 (all candidates are spurious).
 */
export function detectionIou(ref: readonly LabelledBox[], got: readonly LabelledBox[]): number {
  if (ref.length === 0) return got.length === 0 ? 100 : 0;
  const m = matchDetections(ref, got);
  return (m.reduce((s, x) => s + x.iou, 0) / m.length) * 100;
}
