// Outer contours of a mask streamed column by column (columns.ts), in COCO's polygon form: one flat
// [x1, y1, x2, y2, …] per contour, in image pixel-corner coordinates (the pixel (x, y) is the unit square
// from (x, y) to (x + 1, y + 1)), so a contour runs along the pixels' edges and encloses exactly the pixels of
// its component plus those of any holes in it. Holes are not returned (outer contours only; a hole's pixels
// count as inside its component's polygon). Components are 4-connected: two pixels touching only at a corner
// get two contours (which share that corner point). Only the corners of a contour are listed.
//
// Nothing of the image is materialised: the sink keeps each column's foreground runs (the same numbers as the
// RLE), and the tracer walks the boundary on them: a horizontal edge of the boundary is a run's top or bottom
// in one column, a vertical stretch ends where a run of either neighbouring column starts or ends. Memory and
// time grow with the number of runs and corners, not with the mask's area.
import type { ColumnSink } from './columns.ts';

/** COCO polygons: outer contours, each [x1, y1, x2, y2, …] in image pixel-corner coordinates. */
export type Polygons = number[][];

// Directions, clockwise on screen (y down): a right turn is (d + 1) & 3.
const E = 0;
const S = 1;
const W = 2;
const N = 3;
const DX = [1, 0, -1, 0];
const DY = [0, 1, 0, -1];

/** Collects the runs of a mask `width` columns wide and traces its outer contours. */
export class PolygonTracer implements ColumnSink {
  /** Run endpoints, [start, end) pairs, column after column. */
  private ends = new Int32Array(64);
  private n = 0;
  /** Column x's pairs are [colStart[x], colStart[x + 1]). */
  private readonly colStart: Int32Array;
  constructor(readonly width: number, readonly height: number) {
    this.colStart = new Int32Array(width + 1);
  }

  /** Empties the tracer for the next mask of the same size, keeping its buffers. */
  reset(): void {
    this.n = 0;
    this.colStart.fill(0);
  }

  column(x: number, runs: Int32Array, n: number): void {
    if (this.n + n > this.ends.length / 2) {
      const grown = new Int32Array(Math.max(this.ends.length * 2, 2 * (this.n + n)));
      grown.set(this.ends);
      this.ends = grown;
    }
    this.ends.set(runs.subarray(0, 2 * n), 2 * this.n);
    this.n += n;
    this.colStart[x + 1] = this.n;
  }

  /** Index of the run of column x containing row y, or -1 (also outside the image). */
  private runAt(x: number, y: number): number {
    if (x < 0 || x >= this.width || y < 0) return -1;
    let lo = this.colStart[x]!;
    let hi = this.colStart[x + 1]!;
    // Last run starting at or above y.
    while (lo < hi) {
      const m = (lo + hi) >>> 1;
      if (this.ends[2 * m]! <= y) lo = m + 1;
      else hi = m;
    }
    const r = lo - 1;
    return r >= this.colStart[x]! && y < this.ends[2 * r + 1]! ? r : -1;
  }

  private set(x: number, y: number): boolean {
    return this.runAt(x, y) >= 0;
  }

  /** The nearest run start or end of column x strictly below (dir 1) or above (dir -1) row y; ±Infinity if none. */
  private nextEnd(x: number, y: number, dir: 1 | -1): number {
    if (x < 0 || x >= this.width) return dir * Infinity;
    const a = 2 * this.colStart[x]!;
    const b = 2 * this.colStart[x + 1]!;
    // The endpoints of a column are strictly increasing (runs do not touch).
    let lo = a, hi = b;
    if (dir === 1) {
      while (lo < hi) {
        const m = (lo + hi) >>> 1;
        if (this.ends[m]! <= y) lo = m + 1;
        else hi = m;
      }
      return lo < b ? this.ends[lo]! : Infinity;
    }
    while (lo < hi) {
      const m = (lo + hi) >>> 1;
      if (this.ends[m]! < y) lo = m + 1;
      else hi = m;
    }
    return lo > a ? this.ends[lo - 1]! : -Infinity;
  }

  /**
   * Which edges leave the corner point (x, y) with the foreground on their right: a bit per direction. Two only
   * at a saddle (diagonal pixels set).
   */
  private outEdges(x: number, y: number): number {
    const nw = this.set(x - 1, y - 1), ne = this.set(x, y - 1), sw = this.set(x - 1, y), se = this.set(x, y);
    return (se && !ne ? 1 << E : 0) | (sw && !se ? 1 << S : 0) | (nw && !sw ? 1 << W : 0) | (ne && !nw ? 1 << N : 0);
  }

  /** The outer contours, in the order of their leftmost columns (then top to bottom). */
  finish(): Polygons {
    // Each loop holds at least one run top (an eastward edge); the tops already walked are marked.
    const walkedTop = new Uint8Array(this.n);
    const out: Polygons = [];
    for (let x = 0; x < this.width; x++) {
      for (let r = this.colStart[x]!; r < this.colStart[x + 1]!; r++) {
        if (walkedTop[r]) continue;
        const loop = this.trace(x, this.ends[2 * r]!, walkedTop);
        if (loop) out.push(loop);
      }
    }
    return out;
  }

  /** Walks the loop through the eastward edge from (x0, y0); returns its corners if it is an outer contour. */
  private trace(x0: number, y0: number, walkedTop: Uint8Array): number[] | null {
    const pts: number[] = [];
    let x = x0, y = y0, d = E;
    let area2 = 0;
    // Every step walks a boundary edge, and there are at most 2 horizontal and 2 vertical ones per run endpoint.
    const maxSteps = 8 * this.n + 8;
    for (let step = 0; ; step++) {
      if (step > maxSteps) throw new Error(`polygon tracer: the contour from (${x0}, ${y0}) did not close after ${maxSteps} steps (an internal error)`);
      // Walk straight in direction d to the next corner point where the boundary may turn.
      let nx: number, ny: number;
      if (d === E || d === W) {
        // A horizontal edge is one column wide; run tops (E) are marked so no loop is walked twice.
        if (d === E) walkedTop[this.runAt(x, y)]! = 1;
        nx = x + DX[d]!;
        ny = y;
      } else {
        nx = x;
        ny = d === S
          ? Math.min(this.nextEnd(x - 1, y, 1), this.nextEnd(x, y, 1))
          : Math.max(this.nextEnd(x - 1, y, -1), this.nextEnd(x, y, -1));
      }
      area2 += x * ny - nx * y;
      x = nx;
      y = ny;
      const outs = this.outEdges(x, y);
      // Right turn first: keeps a diagonal neighbour out of this contour (4-connected components).
      const right = (d + 1) & 3;
      const left = (d + 3) & 3;
      const nd = outs & (1 << right) ? right : outs & (1 << d) ? d : left;
      if (nd !== d) pts.push(x, y);
      d = nd;
      if (x === x0 && y === y0 && d === E) break;
    }
    return area2 > 0 ? pts : null;
  }
}
