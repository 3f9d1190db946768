// The box Kalman filter against roboflow trackers 2.6.1's ByteTrackTracklet filter (test/fixtures/tracking/
// kalman.json: state and covariance after every predict/update of three box paths with missed frames).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { packageRoot } from '../../src/config/paths.ts';
import { BoxKalman, type Box4 } from '../../src/track/kalman.ts';

interface Step { z: number[] | null; x: number[]; P: number[] }
const cases = JSON.parse(fs.readFileSync(path.join(packageRoot, 'test', 'fixtures', 'tracking', 'kalman.json'), 'utf8')) as { initial: number[]; steps: Step[] }[];

function close(got: ArrayLike<number>, want: number[], what: string): void {
  assert.equal(got.length, want.length, what);
  for (let k = 0; k < want.length; k++) {
    const tol = 1e-9 * Math.max(1, Math.abs(want[k]!));
    assert.ok(Math.abs(got[k]! - want[k]!) <= tol, `${what}[${k}]: ${got[k]} vs reference ${want[k]}`);
  }
}

test('BoxKalman follows the reference filter to 1e-9 through predicts, updates and missed frames', () => {
  assert.equal(cases.length, 3);
  cases.forEach((c, ci) => {
    const kf = new BoxKalman(c.initial as unknown as Box4);
    c.steps.forEach((s, k) => {
      kf.predict();
      if (s.z) kf.update(s.z as unknown as Box4);
      close(kf.x, s.x, `case ${ci} step ${k} x`);
      close(kf.P, s.P, `case ${ci} step ${k} P`);
    });
    assert.ok(c.steps.some((s) => s.z === null) && c.steps.some((s) => s.z !== null));
  });
});

test('BoxKalman: a box from the first measurement, zero velocity, P0 = I', () => {
  const kf = new BoxKalman([1, 2, 3, 4]);
  assert.deepEqual(kf.box(), [1, 2, 3, 4]);
  assert.deepEqual(Array.from(kf.x.slice(4)), [0, 0, 0, 0]);
  kf.predict();
  assert.deepEqual(kf.box(), [1, 2, 3, 4]);
  // P = F I Fᵀ + 0.01 I: a position variance is 1 + 1 + 0.01
  assert.equal(kf.P[0], 2.01);
});
