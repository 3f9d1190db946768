import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fmaf } from '../../src/detect/fmaf.ts';

const f = Math.fround;

/** Exact value of a double as mant * 2^exp (BigInt mantissa, signed). */
function decompose(x: number): { m: bigint; e: number } {
  const dv = new DataView(new ArrayBuffer(8));
  dv.setFloat64(0, x);
  const hi = dv.getUint32(0);
  const lo = dv.getUint32(4);
  const sign = hi >>> 31 ? -1n : 1n;
  const bexp = (hi >>> 20) & 0x7ff;
  const frac = (BigInt(hi & 0xfffff) << 32n) | BigInt(lo);
  if (bexp === 0) return { m: sign * frac, e: -1074 };
  return { m: sign * ((1n << 52n) | frac), e: bexp - 1075 };
}

/** round32(a*b + c) computed exactly with integers, ties to even (the definition of fmaf). */
function exactFmaf(a: number, b: number, c: number): number {
  const A = decompose(a), B = decompose(b), C = decompose(c);
  let pm = A.m * B.m;
  let pe = A.e + B.e;
  let cm = C.m;
  let ce = C.e;
  const E = Math.min(pe, ce);
  pm <<= BigInt(pe - E);
  cm <<= BigInt(ce - E);
  pe = ce = E;
  const N = pm + cm;
  if (N === 0n) return (a * b) + c; // signed zero rules as IEEE (both operands exact)
  const neg = N < 0n;
  const mag = neg ? -N : N;
  const bits = mag.toString(2).length;
  const lsb = Math.max(E + bits - 1 - 23, -149);
  const shift = lsb - E;
  let q: bigint;
  if (shift <= 0) q = mag << BigInt(-shift);
  else {
    q = mag >> BigInt(shift);
    const rem = mag & ((1n << BigInt(shift)) - 1n);
    const half = 1n << BigInt(shift - 1);
    if (rem > half || (rem === half && (q & 1n) === 1n)) q += 1n;
  }
  const v = Number(q) * 2 ** (shift <= 0 ? E : lsb);
  return neg ? -v : v;
}

/** Deterministic xorshift, so a failure prints a reproducible triple. */
function rng(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13; s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5; s >>>= 0;
    return s / 4294967296;
  };
}

function randomF32(r: () => number, minExp: number, maxExp: number): number {
  const mant = 1 + Math.floor(r() * 2 ** 23) / 2 ** 23;
  const e = minExp + Math.floor(r() * (maxExp - minExp + 1));
  return f((r() < 0.5 ? -1 : 1) * mant * 2 ** e);
}

function check(a: number, b: number, c: number): { naiveWrong: boolean; midpointPath: boolean } {
  const want = exactFmaf(a, b, c);
  const got = fmaf(a, b, c);
  if (!Object.is(got, want)) assert.fail(`fmaf(${a}, ${b}, ${c}) = ${got} but the exact rounding is ${want}`);
  const s = a * b + c;
  const r = f(s);
  return { naiveWrong: r !== want, midpointPath: r !== s && f(s + (s - r)) === s + (s - r) };
}

test('fmaf: the BigInt reference itself rounds known cases correctly', () => {
  assert.equal(exactFmaf(1, 1, 2 ** -24), 1); // tie -> even
  assert.equal(exactFmaf(1 + 2 ** -23, 1, 2 ** -24), f(1 + 2 ** -22)); // tie -> even (up)
  assert.equal(exactFmaf(3, 5, 7), 22);
  assert.equal(exactFmaf(0.1, 10, 0), f(f(0.1) * 10));
  assert.equal(exactFmaf(-2, 3, 1), -5);
});

test('fmaf: equals exact rounding on 200k random triples over wide exponents', () => {
  const r = rng(12345);
  for (let i = 0; i < 200_000; i++) check(randomF32(r, -40, 40), randomF32(r, -40, 40), randomF32(r, -60, 60));
});

test('fmaf: equals exact rounding on 300k resize-like triples (u8 x weight + partial sum)', () => {
  const r = rng(777);
  for (let i = 0; i < 300_000; i++) {
    const a = Math.floor(r() * 256);
    const w = f(r() < 0.1 ? r() * 1e-6 : r());
    const c = f(r() * 255);
    check(a, w, c);
  }
});

test('fmaf: f64 sums that land exactly on an f32 midpoint (where fround(a*b+c) is wrong) are rounded correctly', () => {
  // a*b = 2^k (1 + 2^-q)(1 - 2^-q) = 2^k - 2^(k-2q): just under half an ulp of c when c is in [2^(k+24), 2^(k+25)),
  // and the f64 sum rounds to the midpoint c + 2^k, which ties-to-even sends the wrong way half of the time.
  const r = rng(4242);
  let naiveWrong = 0;
  let midpoint = 0;
  let n = 0;
  for (let q = 12; q <= 23; q++) {
    for (let i = 0; i < 2000; i++) {
      const ea = Math.floor(r() * 40) - 20;
      const eb = Math.floor(r() * 40) - 20;
      const sa = r() < 0.5 ? -1 : 1;
      const a = f(sa * 2 ** ea * (1 + 2 ** -q));
      const b = f(2 ** eb * (1 - 2 ** -q));
      const k = ea + eb;
      const c = f((r() < 0.5 ? -1 : 1) * (2 ** 23 + Math.floor(r() * 2 ** 23)) * 2 ** (k + 1));
      const res = check(a, b, c);
      n++;
      if (res.naiveWrong) naiveWrong++;
      if (res.midpointPath) midpoint++;
      // and the mirrored product sign
      check(-a, b, c);
    }
  }
  // The construction must actually hit the double-rounding case, or this test proves nothing.
  assert.ok(midpoint > n / 4, `${midpoint} of ${n} triples took the midpoint path`);
  assert.ok(naiveWrong > n / 8, `naive fround(a*b+c) was wrong on only ${naiveWrong} of ${n}`);
});

test('fmaf: zeros, exact products and binade edges', () => {
  const cases: [number, number, number][] = [
    [0, 0, 0], [0, 5, -0], [-0, 5, 0], [1, 1, -1], [f(1 / 3), 3, -1], [2 ** 20, 2 ** -20, 2 ** -30],
    [1, 1, -(2 ** -25)], [1, 1, -(2 ** -24)], [1, 1, -(2 ** -24) - 2 ** -47], [2, 2 ** -25, 1], [255, f(0.999), f(254.5)],
  ];
  for (const [a, b, c] of cases) check(f(a), f(b), f(c));
});
