// Float32 arithmetic JavaScript lacks: a correctly rounded fused multiply-add. Used by the bit-exact resize
// (preprocess.ts) and the float32 sigmoid (detect/postprocess.ts); proven against exact BigInt arithmetic in
// test/image/fmaf.test.ts.

/**
 * Correctly rounded single-precision fused multiply-add, fmaf(a, b, c) = round32(a*b + c), for f32 a, b, c.
 *
 * a*b of two f32 is exact in f64 (48 <= 53 bits). s = fl64(a*b + c) then has one rounding, and round32(s) is a
 * second one. Double rounding can only go wrong when s lands exactly on the midpoint of two adjacent f32 while
 * the exact sum is not that midpoint: every f32 midpoint is an f64 value, so if the exact sum and s were on
 * opposite sides of a midpoint, the midpoint itself would be a closer f64 than s. So: if s is not a midpoint,
 * fround(s) is the answer; if it is, the exact error e of the f64 addition (Knuth's TwoSum, exact) says on which
 * side the exact sum lies, and e === 0 means a true tie, where fround's ties-to-even is right.
 */
export function fmaf(a: number, b: number, c: number): number {
  const p = a * b;
  const s = p + c;
  const r = Math.fround(s);
  if (r !== s) {
    const o = s + (s - r); // the other f32 neighbour of s, if s is exactly halfway between r and it
    if (Math.fround(o) === o) {
      const bv = s - p;
      const e = (p - (s - bv)) + (c - bv);
      if (e !== 0) return (e > 0) === (o > s) ? o : r;
    }
  }
  return r;
}

