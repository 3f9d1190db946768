// The Kalman filter a track follows its box with: a constant-velocity model over the corners, state
// [x1, y1, x2, y2, vx1, vy1, vx2, vy2], measurement [x1, y1, x2, y2], one predict per frame.
//
// The model and its noise are those of roboflow trackers 2.6.1's ByteTrack tracklet (XYXY state, fixed-rate
// mode): F = I with F[p][p+4] = 1, H = [I4 0], P0 = I8, Q = 0.01·I8, R = 0.1·I4, velocities starting at 0,
// and the covariance update in Joseph form. With the same arithmetic the predicted boxes agree with the
// reference's to rounding, so the same IoUs decide the same matches.

const N = 8; // state size
const M = 4; // measurement size

export interface KalmanNoise {
  /** Process noise variance on every state variable (Q = q·I). */
  process: number;
  /** Measurement noise variance on every corner coordinate (R = r·I). */
  measurement: number;
  /** Initial state variance (P0 = p·I). */
  initial: number;
}

export const BYTETRACK_NOISE: KalmanNoise = { process: 0.01, measurement: 0.1, initial: 1 };

export type Box4 = readonly [number, number, number, number];

/** A constant-velocity corner filter. Matrices are row-major Float64Arrays. */
export class BoxKalman {
  /** State mean, length 8. */
  readonly x = new Float64Array(N);
  /** State covariance, 8×8. */
  readonly P = new Float64Array(N * N);
  private readonly noise: KalmanNoise;

  constructor(box: Box4, noise: KalmanNoise = BYTETRACK_NOISE) {
    this.noise = noise;
    for (let k = 0; k < M; k++) this.x[k] = box[k]!;
    for (let k = 0; k < N; k++) this.P[k * N + k] = noise.initial;
  }

  /** The box the state describes: the first four state variables. */
  box(): [number, number, number, number] {
    return [this.x[0]!, this.x[1]!, this.x[2]!, this.x[3]!];
  }

  /** One frame ahead: x = F x, P = F P Fᵀ + Q. */
  predict(): void {
    const { x, P } = this;
    for (let k = 0; k < M; k++) x[k] = x[k]! + x[k + M]!;
    // F P: row p (< M) becomes row p + row p+M.
    const FP = Float64Array.from(P);
    for (let p = 0; p < M; p++) {
      for (let j = 0; j < N; j++) FP[p * N + j] = P[p * N + j]! + P[(p + M) * N + j]!;
    }
    // (F P) Fᵀ: column p (< M) becomes column p + column p+M.
    for (let i = 0; i < N; i++) {
      for (let j = 0; j < N; j++) {
        P[i * N + j] = j < M ? FP[i * N + j]! + FP[i * N + j + M]! : FP[i * N + j]!;
      }
    }
    for (let k = 0; k < N; k++) P[k * N + k] = P[k * N + k]! + this.noise.process;
  }

  /** Folds in a measured box: K = P Hᵀ S⁻¹ with S = H P Hᵀ + R, x += K (z − H x), Joseph-form P. */
  update(z: Box4): void {
    const { x, P } = this;
    const r = this.noise.measurement;
    // P Hᵀ is P's first M columns (N×M); H P Hᵀ its top-left M×M block.
    const PHt = new Float64Array(N * M);
    for (let i = 0; i < N; i++) for (let j = 0; j < M; j++) PHt[i * M + j] = P[i * N + j]!;
    const S = new Float64Array(M * M);
    for (let i = 0; i < M; i++) for (let j = 0; j < M; j++) S[i * M + j] = PHt[i * M + j]! + (i === j ? r : 0);
    const Sinv = invert(S, M);
    const K = multiply(PHt, N, M, Sinv, M);
    const y = new Float64Array(M);
    for (let k = 0; k < M; k++) y[k] = z[k]! - x[k]!;
    for (let i = 0; i < N; i++) {
      let s = 0;
      for (let k = 0; k < M; k++) s += K[i * M + k]! * y[k]!;
      x[i] = x[i]! + s;
    }
    // A = I − K H: K fills the first M columns.
    const A = new Float64Array(N * N);
    for (let i = 0; i < N; i++) {
      for (let j = 0; j < N; j++) A[i * N + j] = (i === j ? 1 : 0) - (j < M ? K[i * M + j]! : 0);
    }
    const APAt = multiply(multiply(A, N, N, P, N), N, N, transpose(A, N, N), N);
    // K R Kᵀ with R = r·I.
    for (let i = 0; i < N; i++) {
      for (let j = 0; j < N; j++) {
        let s = 0;
        for (let k = 0; k < M; k++) s += K[i * M + k]! * K[j * M + k]!;
        P[i * N + j] = APAt[i * N + j]! + r * s;
      }
    }
  }
}

function multiply(a: Float64Array, rows: number, inner: number, b: Float64Array, cols: number): Float64Array {
  const out = new Float64Array(rows * cols);
  for (let i = 0; i < rows; i++) {
    for (let j = 0; j < cols; j++) {
      let s = 0;
      for (let k = 0; k < inner; k++) s += a[i * inner + k]! * b[k * cols + j]!;
      out[i * cols + j] = s;
    }
  }
  return out;
}

function transpose(a: Float64Array, rows: number, cols: number): Float64Array {
  const out = new Float64Array(rows * cols);
  for (let i = 0; i < rows; i++) for (let j = 0; j < cols; j++) out[j * rows + i] = a[i * cols + j]!;
  return out;
}

/** Gauss–Jordan inverse with partial pivoting. S is symmetric positive definite here (P ≥ 0, R > 0). */
function invert(a: Float64Array, n: number): Float64Array {
  const m = Float64Array.from(a);
  const inv = new Float64Array(n * n);
  for (let k = 0; k < n; k++) inv[k * n + k] = 1;
  for (let col = 0; col < n; col++) {
    let pivot = col;
    for (let r = col + 1; r < n; r++) if (Math.abs(m[r * n + col]!) > Math.abs(m[pivot * n + col]!)) pivot = r;
    const d = m[pivot * n + col]!;
    if (d === 0 || !Number.isFinite(d)) throw new RangeError('BoxKalman: innovation covariance is singular; the filter state is not finite');
    if (pivot !== col) {
      for (let j = 0; j < n; j++) {
        [m[col * n + j], m[pivot * n + j]] = [m[pivot * n + j]!, m[col * n + j]!];
        [inv[col * n + j], inv[pivot * n + j]] = [inv[pivot * n + j]!, inv[col * n + j]!];
      }
    }
    for (let j = 0; j < n; j++) {
      m[col * n + j] = m[col * n + j]! / d;
      inv[col * n + j] = inv[col * n + j]! / d;
    }
    for (let r = 0; r < n; r++) {
      if (r === col) continue;
      const f = m[r * n + col]!;
      if (f === 0) continue;
      for (let j = 0; j < n; j++) {
        m[r * n + j] = m[r * n + j]! - f * m[col * n + j]!;
        inv[r * n + j] = inv[r * n + j]! - f * inv[col * n + j]!;
      }
    }
  }
  return inv;
}
