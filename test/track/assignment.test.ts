// The assignment solver against scipy.optimize.linear_sum_assignment's pairs (test/fixtures/tracking/
// assignment.json: random, tied and rectangular matrices) and against brute force over every assignment.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { packageRoot } from '../../src/config/paths.ts';
import { linearSumAssignment } from '../../src/track/assignment.ts';

interface Case { rows: number; cols: number; maximize: boolean; cost: number[]; expected_rows: number[]; expected_cols: number[] }
const cases = JSON.parse(fs.readFileSync(path.join(packageRoot, 'test', 'fixtures', 'tracking', 'assignment.json'), 'utf8')) as Case[];

test('linearSumAssignment gives scipy\'s pairs, ties included, on every reference matrix', () => {
  assert.ok(cases.length >= 60);
  for (const c of cases) {
    const got = linearSumAssignment(c.cost, c.rows, c.cols, c.maximize);
    const what = `${c.rows}×${c.cols} maximize=${c.maximize} cost=${JSON.stringify(c.cost)}`;
    assert.deepEqual(got.rows, c.expected_rows, what);
    assert.deepEqual(got.cols, c.expected_cols, what);
  }
});

/** The best total over every injective map of the shorter side into the longer (brute force). */
function bruteForce(cost: number[], nr: number, nc: number, maximize: boolean): number {
  let best = maximize ? -Infinity : Infinity;
  const used = new Array<boolean>(Math.max(nr, nc)).fill(false);
  const short = Math.min(nr, nc);
  const at = (a: number, b: number) => (nr <= nc ? cost[a * nc + b]! : cost[b * nc + a]!);
  const walk = (a: number, sum: number) => {
    if (a === short) {
      best = maximize ? Math.max(best, sum) : Math.min(best, sum);
      return;
    }
    for (let b = 0; b < Math.max(nr, nc); b++) {
      if (used[b]) continue;
      used[b] = true;
      walk(a + 1, sum + at(a, b));
      used[b] = false;
    }
  };
  walk(0, 0);
  return best;
}

test('linearSumAssignment is optimal and one to one on random matrices (brute force)', () => {
  let seed = 12345;
  const rand = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
  for (let n = 0; n < 300; n++) {
    const nr = 1 + Math.floor(rand() * 6);
    const nc = 1 + Math.floor(rand() * 6);
    const cost = Array.from({ length: nr * nc }, () => (n % 3 === 0 ? Math.floor(rand() * 3) : rand()));
    const maximize = n % 2 === 1;
    const { rows, cols } = linearSumAssignment(cost, nr, nc, maximize);
    assert.equal(rows.length, Math.min(nr, nc));
    assert.equal(new Set(rows).size, rows.length);
    assert.equal(new Set(cols).size, cols.length);
    assert.deepEqual(rows, [...rows].sort((a, b) => a - b));
    const total = rows.reduce((s, r, k) => s + cost[r * nc + cols[k]!]!, 0);
    assert.ok(Math.abs(total - bruteForce(cost, nr, nc, maximize)) < 1e-9, `${nr}×${nc} ${JSON.stringify(cost)}`);
  }
});

test('linearSumAssignment: empty sides give no pairs; a wrong size or a non-finite cost is an error naming it', () => {
  assert.deepEqual(linearSumAssignment([], 0, 3), { rows: [], cols: [] });
  assert.deepEqual(linearSumAssignment([], 2, 0), { rows: [], cols: [] });
  assert.throws(() => linearSumAssignment([1, 2, 3], 2, 2), /expected 2×2 = 4 costs but received 3/);
  assert.throws(() => linearSumAssignment([1, NaN, 3, 4], 2, 2), /cost\[0\]\[1\] is NaN; expected a finite number/);
});
