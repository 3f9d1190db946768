// The rectangular linear assignment problem: pick at most one column per row and one row per column so the
// summed cost is minimal (or maximal), every row matched when rows ≤ columns (and vice versa).
//
// The algorithm is the shortest augmenting path of Crouse, "On implementing 2D rectangular assignment
// algorithms" (IEEE TAES 2016) — the one behind scipy.optimize.linear_sum_assignment, which the tracker we
// follow (roboflow trackers' ByteTrack) calls. An optimal assignment is not unique when costs tie (two tracks
// with the same IoU against one box), and any other solver may break such a tie differently; following the
// same search order, the same tie rule (prefer an unassigned column among equal reduced costs) and the same
// transposition for tall matrices gives the same pairs, so the same detections get the same tracks. The npm
// solvers (munkres, linear-sum-assignment) are Hungarian-style and break ties their own way.

export interface Assignment {
  /** Row indices, ascending. */
  rows: number[];
  /** `cols[k]` is the column assigned to `rows[k]`. */
  cols: number[];
}

/**
 * Solves the assignment for a `nRows × nCols` row-major cost matrix. `maximize` maximises the summed cost
 * instead. Costs must be finite (NaN or ±Infinity throws: the caller's matrix is wrong, not the input).
 */
export function linearSumAssignment(cost: ArrayLike<number>, nRows: number, nCols: number, maximize = false): Assignment {
  if (cost.length !== nRows * nCols) {
    throw new RangeError(`linearSumAssignment: expected ${nRows}×${nCols} = ${nRows * nCols} costs but received ${cost.length}`);
  }
  if (nRows === 0 || nCols === 0) return { rows: [], cols: [] };
  const transpose = nCols < nRows;
  const nr = transpose ? nCols : nRows;
  const nc = transpose ? nRows : nCols;
  const c = new Float64Array(nr * nc);
  for (let i = 0; i < nRows; i++) {
    for (let j = 0; j < nCols; j++) {
      const v = cost[i * nCols + j]!;
      if (!Number.isFinite(v)) throw new RangeError(`linearSumAssignment: cost[${i}][${j}] is ${v}; expected a finite number`);
      c[transpose ? j * nc + i : i * nc + j] = maximize ? -v : v;
    }
  }

  const u = new Float64Array(nr);
  const v = new Float64Array(nc);
  const shortest = new Float64Array(nc);
  const path = new Int32Array(nc).fill(-1);
  const col4row = new Int32Array(nr).fill(-1);
  const row4col = new Int32Array(nc).fill(-1);
  const seenRow = new Uint8Array(nr);
  const seenCol = new Uint8Array(nc);
  const remaining = new Int32Array(nc);

  for (let cur = 0; cur < nr; cur++) {
    // Dijkstra over reduced costs from row `cur` until an unassigned column (the sink) is reached.
    let minVal = 0;
    let numRemaining = nc;
    for (let k = 0; k < nc; k++) remaining[k] = nc - k - 1;
    seenRow.fill(0);
    seenCol.fill(0);
    shortest.fill(Infinity);
    let sink = -1;
    let i = cur;
    while (sink === -1) {
      let index = -1;
      let lowest = Infinity;
      seenRow[i] = 1;
      for (let k = 0; k < numRemaining; k++) {
        const j = remaining[k]!;
        const r = minVal + c[i * nc + j]! - u[i]! - v[j]!;
        if (r < shortest[j]!) {
          path[j] = i;
          shortest[j] = r;
        }
        if (shortest[j]! < lowest || (shortest[j] === lowest && row4col[j] === -1)) {
          lowest = shortest[j]!;
          index = k;
        }
      }
      minVal = lowest;
      const j = remaining[index]!;
      if (row4col[j] === -1) sink = j;
      else i = row4col[j]!;
      seenCol[j] = 1;
      remaining[index] = remaining[--numRemaining]!;
    }
    // Update the dual variables, then flip the augmenting path.
    u[cur]! += minVal;
    for (let r = 0; r < nr; r++) {
      if (seenRow[r] && r !== cur) u[r]! += minVal - shortest[col4row[r]!]!;
    }
    for (let j = 0; j < nc; j++) {
      if (seenCol[j]) v[j]! -= minVal - shortest[j]!;
    }
    let j = sink;
    for (;;) {
      const r = path[j]!;
      row4col[j] = r;
      const prev = col4row[r]!;
      col4row[r] = j;
      j = prev;
      if (r === cur) break;
    }
  }

  if (!transpose) return { rows: Array.from({ length: nr }, (_, k) => k), cols: Array.from(col4row) };
  // Transposed: col4row maps original columns to original rows; report by original row, ascending.
  const pairs = Array.from(col4row, (row, col) => [row, col] as const).sort((a, b) => a[0] - b[0]);
  return { rows: pairs.map((p) => p[0]), cols: pairs.map((p) => p[1]) };
}
