// One detection's mask at the original image size, produced column by column (the order of COCO's RLE) as the
// foreground row ranges of each column, never as an image: upstream's
// `F.interpolate(mask_logits[None, None], size=(H, W), mode='bilinear', align_corners=False) > 0` (grid.ts).
//
// Output-sensitive. Between two adjacent source rows i and i+1 and source columns j and j+1 (a cell), the
// upsampled logit is a convex combination of the cell's 4 corners, so a cell whose corners are all > 0 is all
// foreground and one whose corners are all ≤ 0 is all background, whatever the weights: such cells cost nothing
// per pixel. In a mixed cell, one output column's values are c0·(1 − λy) + c1·λy with c0, c1 the column's
// interpolated values on rows i and i+1, monotone in y (λy never decreases), so the single crossing is found by
// a binary search over the pixels' own values. Work per detection: M² sign tests, then per output column the
// cell list of its source column (rebuilt when the source column changes) and log(H/M) evaluations per mixed
// cell.
import type { MaskGrid } from './grid.ts';

/** Receives a mask column by column, x = 0 … width − 1 in order, each exactly once. */
export interface ColumnSink {
  /**
   * The foreground rows of column x: [runs[2k], runs[2k + 1]) for k < n, ascending, disjoint and not touching.
   * `runs` is reused for the next column.
   */
  column(x: number, runs: Int32Array, n: number): void;
}

const NEG = 0;
const POS = 1;
const MIXED = 2;

/** Streams the mask of `logits` (f32 M×M, row-major) upsampled to the grid's image into `sinks`. */
export function streamMask(logits: Float32Array, grid: MaskGrid, ...sinks: ColumnSink[]): void {
  const M = grid.side;
  if (logits.length !== M * M) {
    throw new RangeError(`mask upsample: expected ${M}×${M} = ${M * M} mask logits but received ${logits.length}`);
  }
  const { x: ax, y: ay } = grid;
  // 1: > 0, 0: ≤ 0, 2: NaN (neither: its cells are mixed, and NaN is never foreground).
  const sign = new Uint8Array(M * M);
  for (let k = 0; k < M * M; k++) {
    const v = logits[k]!;
    sign[k] = v > 0 ? 1 : v <= 0 ? 0 : 2;
  }
  // The cells of the current source column j: POS runs of rows (merged) and MIXED cells, NEG ones left out.
  const kind = new Uint8Array(M);
  const cellY0 = new Int32Array(M);
  const cellY1 = new Int32Array(M);
  const cellRow = new Int32Array(M);
  let cells = 0;
  let j = -1;
  let j1 = -1;
  const buildColumnCells = () => {
    cells = 0;
    for (let i = 0; i < M; i++) {
      const y0 = ay.start[i]!;
      const y1 = ay.start[i + 1]!;
      if (y0 === y1) continue;
      const i1 = i + 1 < M ? i + 1 : i;
      const a = sign[i * M + j]!, b = sign[i * M + j1]!, c = sign[i1 * M + j]!, d = sign[i1 * M + j1]!;
      const k = a === 1 && b === 1 && c === 1 && d === 1 ? POS : a === 0 && b === 0 && c === 0 && d === 0 ? NEG : MIXED;
      if (k === NEG) continue;
      if (k === POS && cells > 0 && kind[cells - 1] === POS && cellY1[cells - 1] === y0) {
        cellY1[cells - 1] = y1;
        continue;
      }
      kind[cells] = k;
      cellY0[cells] = y0;
      cellY1[cells] = y1;
      cellRow[cells] = i;
      cells++;
    }
  };
  const runs = new Int32Array(2 * M);
  const mu = ay.mu;
  const lam = ay.lambda;
  for (let x = 0; x < grid.width; x++) {
    if (ax.i0[x] !== j) {
      j = ax.i0[x]!;
      j1 = j + 1 < M ? j + 1 : j;
      buildColumnCells();
    }
    const wx1 = ax.lambda[x]!;
    const wx0 = ax.mu[x]!;
    let n = 0;
    for (let t = 0; t < cells; t++) {
      let a = cellY0[t]!;
      let b = cellY1[t]!;
      if (kind[t] === MIXED) {
        const i = cellRow[t]!;
        const i1 = i + 1 < M ? i + 1 : i;
        const c0 = logits[i * M + j]! * wx0 + logits[i * M + j1]! * wx1;
        const c1 = logits[i1 * M + j]! * wx0 + logits[i1 * M + j1]! * wx1;
        if (c0 > 0 && c1 > 0) {
          // the whole cell column
        } else if (c0 > 0) {
          // Falling: foreground up to the first pixel that is not.
          let lo = a, hi = b;
          while (lo < hi) {
            const m = (lo + hi) >>> 1;
            if (c0 * mu[m]! + c1 * lam[m]! > 0) lo = m + 1;
            else hi = m;
          }
          b = lo;
        } else if (c1 > 0) {
          // Rising: foreground from the first pixel that is.
          let lo = a, hi = b;
          while (lo < hi) {
            const m = (lo + hi) >>> 1;
            if (c0 * mu[m]! + c1 * lam[m]! > 0) hi = m;
            else lo = m + 1;
          }
          a = lo;
        } else {
          continue;
        }
      }
      if (a >= b) continue;
      if (n > 0 && runs[2 * n - 1] === a) runs[2 * n - 1] = b;
      else {
        runs[2 * n] = a;
        runs[2 * n + 1] = b;
        n++;
      }
    }
    for (const s of sinks) s.column(x, runs, n);
  }
}
