// How close two engines' raw outputs are, element by element: the largest absolute difference and the Pearson
// correlation (the port's PCC). `rfdetr verify` gates on them; the tests compare against fixtures with them.

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
