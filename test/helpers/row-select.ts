// The sidecar's row selection (sidecar/src/engines/row-select.h; PROTOCOL.md "Selected rows") in TypeScript,
// for test doubles that play a segment model: the queries whose rows a selected output would carry.
import type { RowSelect } from '../../src/sidecar/backend.ts';

const sigmoid = (x: number) => 1 / (1 + Math.exp(-x));
const MARGIN = 2 ** -20;

export function selectRows(logits: Float32Array, numQueries: number, numClasses: number, sel: RowSelect): number[] {
  if (sel.max === 0) return [];
  const cands: { q: number; logit: number }[] = [];
  for (let q = 0; q < numQueries; q++) {
    let label = -1;
    let best = 0;
    for (let c = 0; c < numClasses; c++) {
      const v = logits[q * numClasses + c]!;
      if (v === v && (label < 0 || v > best)) {
        label = c;
        best = v;
      }
    }
    if (label < 0 || (sel.classes && !sel.classes.includes(label))) continue;
    const thr = sel.classThresholds?.get(label) ?? sel.threshold;
    if (sigmoid(best) > thr - MARGIN) cands.push({ q, logit: best });
  }
  cands.sort((a, b) => (a.logit !== b.logit ? b.logit - a.logit : a.q - b.q));
  if (cands.length <= sel.max) return cands.map((c) => c.q);
  const floor = sigmoid(cands[sel.max - 1]!.logit) - MARGIN;
  const out: number[] = [];
  for (let i = 0; i < cands.length && (i < sel.max || sigmoid(cands[i]!.logit) >= floor); i++) out.push(cands[i]!.q);
  return out;
}
