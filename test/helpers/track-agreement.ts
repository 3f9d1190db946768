// Agreement between a reference's track ids and ours, up to renumbering: the reference's ids are mapped one to
// one onto ours by the assignment that maximises co-occurring detections, and a detection agrees when its id is
// the image of the reference's under that map, or when neither side tracks it.
import { linearSumAssignment } from '../../src/track/assignment.ts';

export interface Agreement {
  detections: number;
  agreeing: number;
  /** Detections the reference tracks (id ≥ 0). */
  trackedByReference: number;
  /** agreeing / detections, 1 for an empty sequence. */
  fraction: number;
}

/** `ref[f][i]` is the reference's id for detection i of frame f (-1 none); `got[f][i]` ours (null none). */
export function trackAgreement(ref: readonly (readonly number[])[], got: readonly (readonly (number | null)[])[]): Agreement {
  if (ref.length !== got.length) throw new Error(`trackAgreement: ${ref.length} reference frames but ${got.length} tracked frames`);
  const refIds = new Map<number, number>();
  const gotIds = new Map<number, number>();
  const pairs = new Map<string, number>();
  ref.forEach((frame, f) => {
    const g = got[f]!;
    if (frame.length !== g.length) throw new Error(`trackAgreement: frame ${f} has ${frame.length} reference detections but ${g.length} tracked`);
    frame.forEach((r, i) => {
      const o = g[i];
      if (r < 0 || o === null || o === undefined) return;
      if (!refIds.has(r)) refIds.set(r, refIds.size);
      if (!gotIds.has(o)) gotIds.set(o, gotIds.size);
      const key = `${refIds.get(r)},${gotIds.get(o)}`;
      pairs.set(key, (pairs.get(key) ?? 0) + 1);
    });
  });
  const nR = refIds.size;
  const nG = gotIds.size;
  const counts = new Float64Array(nR * nG);
  for (const [key, n] of pairs) {
    const [a, b] = key.split(',').map(Number) as [number, number];
    counts[a * nG + b] = n;
  }
  const map = new Map<number, number>(); // dense ref index → dense got index
  const { rows, cols } = linearSumAssignment(counts, nR, nG, true);
  rows.forEach((a, k) => map.set(a, cols[k]!));
  let detections = 0;
  let agreeing = 0;
  let trackedByReference = 0;
  ref.forEach((frame, f) => {
    frame.forEach((r, i) => {
      const o = got[f]![i] ?? null;
      detections++;
      if (r >= 0) trackedByReference++;
      if (r < 0 && o === null) agreeing++;
      else if (r >= 0 && o !== null && map.get(refIds.get(r)!) === gotIds.get(o)) agreeing++;
    });
  });
  return { detections, agreeing, trackedByReference, fraction: detections === 0 ? 1 : agreeing / detections };
}
