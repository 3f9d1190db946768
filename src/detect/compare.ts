// How close two engines' raw outputs are: element by element, the largest absolute difference and the Pearson
// correlation (the port's PCC); as ranked scores, the top-100 overlap. `rfdetr verify` gates on them; the tests compare against fixtures with them.

export function maxAbsDiff(a: Float32Array, b: Float32Array): number {
  if (a.length !== b.length) return Infinity;
  let m = 0;
  for (let i = 0; i < a.length; i++) {
    const d = Math.abs(a[i]! - b[i]!);
    if (!(d <= m)) m = d; // NaN propagates as NaN
  }
  return m;
}

/** Pearson correlation (the port's PCC). */
export function pcc(a: Float32Array, b: Float32Array): number {
  const n = a.length;
  if (n !== b.length || n === 0) return NaN;
  let ma = 0, mb = 0;
  for (let i = 0; i < n; i++) { ma += a[i]!; mb += b[i]!; }
  ma /= n; mb /= n;
  let sab = 0, saa = 0, sbb = 0;
  for (let i = 0; i < n; i++) {
    const x = a[i]! - ma, y = b[i]! - mb;
    sab += x * y; saa += x * x; sbb += y * y;
  }
  return saa === 0 || sbb === 0 ? (saa === sbb ? 1 : 0) : sab / Math.sqrt(saa * sbb);
}

/**
 * How many of a's 100 highest values (flattened; ties to the lower index) are among b's 100 highest: 100 = the
 * same set. ../shared/peers/int8_peers.py's `top100` and the C++ benches' measure of a quantised run's logits.
 */
export function top100Overlap(a: Float32Array, b: Float32Array): number {
  const top = (v: Float32Array): Set<number> => {
    const idx = Array.from(v.keys());
    idx.sort((i, j) => (v[j]! - v[i]!) || (i - j));
    return new Set(idx.slice(0, 100));
  };
  const sb = top(b);
  let n = 0;
  for (const i of top(a)) n += sb.has(i) ? 1 : 0;
  return n;
}
