import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { fmaf } from '../../src/image/fmaf.ts';
import { axisWeights, computeAxisWeights, IMAGENET_MEAN, IMAGENET_STD, INPUT_SIZE, preprocess, resizeHeightNormalise, type AxisWeights } from '../../src/image/preprocess.ts';
import fs from 'node:fs';
import path from 'node:path';
import sharp from 'sharp';
import { testFixturesDir } from '../../src/config/paths.ts';
import { isRfdetrError } from '../../src/errors.ts';
import { closePreprocessWorker, decodeAndPreprocessAsync, preprocessAsync } from '../../src/image/preprocess-async.ts';
import { decodeImage, MAX_IMAGE_BYTES, type RgbImage } from '../../src/image/decode.ts';

after(() => closePreprocessWorker());

const f = Math.fround;

function image(width: number, height: number, seed: number): RgbImage {
  const data = new Uint8Array(width * height * 3);
  let s = seed >>> 0;
  for (let i = 0; i < data.length; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    data[i] = s >>> 24;
  }
  return { data, width, height };
}

/** The recipe written out plainly (one pixel, one channel, one tap at a time, `fmaf` from fmaf.ts). */
function referencePreprocess(img: RgbImage): Float32Array {
  const { width: W, height: H, data } = img;
  const wx = computeAxisWeights(W, INPUT_SIZE);
  const wy = computeAxisWeights(H, INPUT_SIZE);
  const tmp = new Float32Array(3 * H * INPUT_SIZE); // CHW
  for (let c = 0; c < 3; c++) for (let y = 0; y < H; y++) for (let x = 0; x < INPUT_SIZE; x++) {
    let acc = 0;
    for (let j = 0; j < wx.count[x]!; j++) acc = fmaf(data[(y * W + wx.start[x]! + j) * 3 + c]!, wx.weights[x * wx.maxTaps + j]!, acc);
    tmp[(c * H + y) * INPUT_SIZE + x] = acc;
  }
  const out = new Float32Array(3 * INPUT_SIZE * INPUT_SIZE);
  for (let c = 0; c < 3; c++) for (let y = 0; y < INPUT_SIZE; y++) for (let x = 0; x < INPUT_SIZE; x++) {
    let acc = 0;
    for (let j = 0; j < wy.count[y]!; j++) acc = fmaf(tmp[(c * H + wy.start[y]! + j) * INPUT_SIZE + x]!, wy.weights[y * wy.maxTaps + j]!, acc);
    out[(c * INPUT_SIZE + y) * INPUT_SIZE + x] = f(f(f(acc * f(1 / 255)) - IMAGENET_MEAN[c]!) / IMAGENET_STD[c]!);
  }
  return out;
}

function firstDifference(a: Float32Array, b: Float32Array): string | null {
  for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) return `index ${i}: ${a[i]} vs ${b[i]}`;
  return a.length === b.length ? null : `lengths ${a.length} vs ${b.length}`;
}

test('preprocess: the fast kernels equal the plain reference bit for bit on odd sizes (up, down, mixed, 1 px, 560)', () => {
  // 6000 wide has outputs with weights below 2^-21, so both width-pass paths (u8Exact and checked) run.
  const mixed = axisWeights(6000, INPUT_SIZE).u8Exact;
  assert.ok(mixed.includes(0) && mixed.includes(1));
  for (const [w, h, seed] of [[1, 1, 1], [3, 1201, 2], [1201, 7, 3], [559, 561, 4], [560, 560, 5], [97, 1033, 6], [2000, 45, 7], [6000, 3, 8]] as const) {
    const img = image(w, h, seed);
    const diff = firstDifference(preprocess(img), referencePreprocess(img));
    assert.equal(diff, null, `${w}x${h}: ${diff}`);
  }
});

test('resizeHeightNormalise: its inlined fma is exact where the f64 sum lands on an f32 midpoint', () => {
  // Row 0 holds c (weight 1), row 1 holds a (weight b): acc = fmaf(a, b, c) with a*b just under half an ulp of c,
  // the construction of the fmaf test, where fround(a*b + c) rounds the wrong way for odd c.
  const rowLen = INPUT_SIZE * 3;
  const tmp = new Float32Array(2 * rowLen);
  const wts = new Float32Array(INPUT_SIZE * 2);
  const q = 16;
  const a = f(1 + 2 ** -q);
  const b = f(2 ** -17 * (1 - 2 ** -q));
  for (let y = 0; y < INPUT_SIZE; y++) wts.set([1, b], y * 2);
  for (let k = 0; k < rowLen; k++) {
    tmp[k] = f((2 ** 23 + 7919 * k) * 2 ** -16); // c in [128, 256), odd and even significands
    tmp[rowLen + k] = a;
  }
  const wy: AxisWeights = { inSize: 2, outSize: INPUT_SIZE, maxTaps: 2, start: new Int32Array(INPUT_SIZE), count: new Int32Array(INPUT_SIZE).fill(2), weights: wts, u8Exact: new Uint8Array(INPUT_SIZE) };
  const acc = new Float32Array(rowLen);
  resizeHeightNormalise(tmp, 0, wy, new Float32Array(3 * INPUT_SIZE * INPUT_SIZE), acc, 0, INPUT_SIZE);
  let naiveWrong = 0;
  for (let k = 0; k < rowLen; k++) {
    const c = tmp[k]!;
    assert.equal(acc[k], fmaf(a, b, c), `column ${k}: c = ${c}`);
    if (f(a * b + c) !== acc[k]) naiveWrong++;
  }
  assert.ok(naiveWrong > rowLen / 4, `the construction must hit double rounding (naive wrong on ${naiveWrong} of ${rowLen})`);
});

test('preprocess: 560x560 input is the identity resize; constant images stay constant', () => {
  const img = image(560, 560, 9);
  const out = preprocess(img);
  for (const i of [0, 1, 12345, 560 * 560 - 1]) {
    for (let c = 0; c < 3; c++) {
      const v = img.data[i * 3 + c]!;
      assert.equal(out[c * 560 * 560 + i], f(f(f(v * f(1 / 255)) - IMAGENET_MEAN[c]!) / IMAGENET_STD[c]!));
    }
  }
  const grey = { data: new Uint8Array(1234 * 77 * 3).fill(200), width: 1234, height: 77 };
  const g = preprocess(grey);
  const want0 = f(f(f(200 * f(1 / 255)) - IMAGENET_MEAN[0]) / IMAGENET_STD[0]);
  assert.ok(g.subarray(0, 560 * 560).every((v) => Math.abs(v - want0) < 1e-5), 'a constant plane resizes to (nearly) the constant');
});

test('computeAxisWeights: taps sum to 1 (f32), stay inside the input, and are cached per size', () => {
  for (const [n, m] of [[4000, 560], [640, 560], [480, 560], [333, 560], [1, 560], [8192, 560]] as const) {
    const w = computeAxisWeights(n, m);
    for (let i = 0; i < m; i++) {
      const s = w.start[i]!, c = w.count[i]!;
      assert.ok(s >= 0 && c > 0 && s + c <= n, `${n}->${m} out ${i}: [${s}, ${s + c})`);
      let sum = 0;
      for (let j = 0; j < c; j++) sum += w.weights[i * w.maxTaps + j]!;
      assert.ok(Math.abs(sum - 1) < 1e-6, `${n}->${m} out ${i}: weights sum to ${sum}`);
    }
  }
  assert.equal(axisWeights(640, 560), axisWeights(640, 560));
  assert.throws(() => computeAxisWeights(0, 560), /positive integer sizes but received 0 -> 560/);
});

test('preprocess: bad images and output buffers are RangeErrors that say what was expected', () => {
  assert.throws(() => preprocess({ data: new Uint8Array(10), width: 2, height: 2 }), /expected 2\*2\*3 = 12 RGB bytes but received 10/);
  assert.throws(() => preprocess({ data: new Uint8Array(0), width: 0, height: 0 }), /positive integer width and height but received 0x0/);
  assert.throws(() => preprocess(image(4, 4, 1), new Float32Array(10)), /out must hold 940800 floats but holds 10/);
});

test('preprocessAsync: the worker returns exactly what preprocess returns, in order, and leaves the image intact', async () => {
  const imgs = [image(640, 480, 11), image(333, 517, 12), image(1500, 900, 13)];
  const copies = imgs.map((i) => i.data.slice());
  const results = await Promise.all(imgs.map((i) => preprocessAsync(i)));
  for (let k = 0; k < imgs.length; k++) {
    assert.equal(firstDifference(results[k]!, preprocess(imgs[k]!)), null);
    assert.deepEqual(imgs[k]!.data, copies[k]);
  }
  // a view into a larger buffer sends only its own bytes
  const big = new Uint8Array(10 + 64 * 48 * 3);
  big.set(image(64, 48, 14).data, 10);
  const view = { data: big.subarray(10), width: 64, height: 48 };
  assert.equal(firstDifference(await preprocessAsync(view), preprocess(view)), null);
  // a Buffer as image data (whose slice() is a view) is copied, not detached
  const asBuffer = { data: Buffer.from(imgs[1]!.data), width: 333, height: 517 };
  assert.equal(firstDifference(await preprocessAsync(asBuffer), results[1]!), null);
  assert.equal(asBuffer.data.length, 333 * 517 * 3);
  // inline below a size gives the same numbers
  assert.equal(firstDifference(await preprocessAsync(imgs[0]!, { inlineBelowPixels: 1e9 }), results[0]!), null);
});

test('preprocessAsync: errors reject, a closed worker rejects what was pending and a new one starts', async () => {
  await assert.rejects(preprocessAsync({ data: new Uint8Array(5), width: 2, height: 2 }), /expected 2\*2\*3 = 12 RGB bytes but received 5/);
  const pending = assert.rejects(preprocessAsync(image(2000, 1500, 15)), /preprocess worker closed/);
  await closePreprocessWorker();
  await pending;
  const img = image(50, 40, 16);
  assert.equal(firstDifference(await preprocessAsync(img), preprocess(img)), null);
});

test('decodeAndPreprocessAsync: decodes and preprocesses on the worker, equal to decodeImage + preprocess', async () => {
  const fixture = path.join(testFixturesDir, 'rfdetr-synth', 'case-2', 'input.png');
  const bytes = fs.readFileSync(fixture);
  const before = Buffer.from(bytes);
  const [a, b] = await Promise.all([decodeAndPreprocessAsync(bytes), decodeAndPreprocessAsync(new Uint8Array(bytes))]);
  const want = preprocess(await decodeImage(bytes));
  for (const r of [a, b]) {
    assert.deepEqual([r.width, r.height], [333, 517]);
    assert.equal(firstDifference(r.pixelValues, want), null);
    assert.ok(r.decodeMs > 0 && r.preprocessMs > 0);
  }
  assert.deepEqual(bytes, before, 'the caller keeps its bytes');
});

test('decodeAndPreprocessAsync: decode errors keep their RfdetrError code and message across the thread', async () => {
  const expectCode = (code: string, re: RegExp) => (e: unknown) => {
    assert.ok(isRfdetrError(e), `not an RfdetrError: ${String(e)}`);
    assert.equal(e.code, code);
    assert.equal(e.status, 400);
    assert.match(e.message, re);
    return true;
  };
  await assert.rejects(decodeAndPreprocessAsync(Buffer.alloc(0)), expectCode('E_IMAGE_UNDECODABLE', /empty \(0 bytes\)/));
  await assert.rejects(decodeAndPreprocessAsync(Buffer.from('not an image at all')), expectCode('E_IMAGE_UNDECODABLE', /not a readable image/));
  await assert.rejects(decodeAndPreprocessAsync(Buffer.alloc(MAX_IMAGE_BYTES + 1)), expectCode('E_IMAGE_TOO_LARGE', /limit is 33554432 bytes/));
  const wide = await sharp({ create: { width: 8193, height: 1, channels: 3, background: 'red' } }).png().toBuffer();
  await assert.rejects(decodeAndPreprocessAsync(wide), (e: unknown) => {
    assert.ok(isRfdetrError(e, 'E_IMAGE_TOO_LARGE'));
    assert.deepEqual(e.details, { width: 8193, height: 1, limit: 8192 });
    return true;
  });
  // the worker is still serving
  const ok = await decodeAndPreprocessAsync(await sharp({ create: { width: 20, height: 10, channels: 3, background: 'blue' } }).png().toBuffer());
  assert.deepEqual([ok.width, ok.height], [20, 10]);
});
