import { test } from 'node:test';
import assert from 'node:assert/strict';
import sharp from 'sharp';
import zlib from 'node:zlib';
import { decodeImage, MAX_IMAGE_BYTES, MAX_IMAGE_SIDE } from '../../src/image/decode.ts';
import { isRfdetrError, type ErrorCode } from '../../src/errors.ts';
import { be16, dropChunks, makePng } from './png-helper.ts';

/** Deterministic bytes (an LCG), so failures reproduce. */
function bytes(n: number, seed = 1): Uint8Array {
  const out = new Uint8Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out[i] = s >>> 24;
  }
  return out;
}

async function rejects(input: Uint8Array, code: ErrorCode, message: RegExp): Promise<void> {
  await assert.rejects(decodeImage(input), (e: unknown) => {
    assert.ok(isRfdetrError(e, code), `expected RfdetrError ${code} but got ${String(e)}`);
    assert.match((e as Error).message, message);
    assert.equal((e as { status: number }).status, 400);
    return true;
  });
}

test('decode: 8-bit RGB PNG round-trips every byte at the original size', async () => {
  const w = 7, h = 5;
  const px = bytes(w * h * 3, 7);
  const png = await sharp(px, { raw: { width: w, height: h, channels: 3 } }).png().toBuffer();
  const img = await decodeImage(png);
  assert.equal(img.width, w);
  assert.equal(img.height, h);
  assert.deepEqual([...img.data], [...px]);
  const interlaced = await sharp(px, { raw: { width: w, height: h, channels: 3 } }).png({ progressive: true }).toBuffer();
  assert.deepEqual([...(await decodeImage(interlaced)).data], [...px], 'Adam7-interlaced PNG');
});

test('decode: RGBA drops alpha without compositing (sharp-made and hand-made PNG)', async () => {
  const w = 4, h = 3;
  const rgba = bytes(w * h * 4, 11);
  for (let i = 0; i < w * h; i += 3) rgba[i * 4 + 3] = 0; // fully transparent pixels keep their colour
  const want = [...rgba].filter((_, i) => i % 4 !== 3);
  const viaSharp = await sharp(rgba, { raw: { width: w, height: h, channels: 4 } }).png().toBuffer();
  assert.equal((await sharp(viaSharp).metadata()).channels, 4);
  assert.deepEqual([...(await decodeImage(viaSharp)).data], want);
  const handMade = makePng({ width: w, height: h, colourType: 6, bitDepth: 8, rows: rgba });
  assert.deepEqual([...(await decodeImage(handMade)).data], want);
});

test('decode: palette PNG (with tRNS) expands to the palette colours, transparency ignored', async () => {
  const palette = new Uint8Array([255, 0, 0, 0, 255, 0, 0, 0, 255, 10, 20, 30]);
  const trns = new Uint8Array([0, 128, 255, 0]);
  const idx = new Uint8Array([0, 1, 2, 3, 3, 2, 1, 0]); // 4x2, 8-bit indices
  const png = makePng({ width: 4, height: 2, colourType: 3, bitDepth: 8, rows: idx, palette, trns });
  const img = await decodeImage(png);
  assert.deepEqual([...img.data], [...idx].flatMap((i) => [...palette.subarray(i * 3, i * 3 + 3)]));
  // 2-bit indices, no tRNS
  const packed = new Uint8Array([0b00011011]); // indices 0,1,2,3
  const img2 = await decodeImage(makePng({ width: 4, height: 1, colourType: 3, bitDepth: 2, rows: packed, palette }));
  assert.deepEqual([...img2.data], [...palette]);
  // sharp's own palette output decodes to 3 channels of the palette
  const viaSharp = await sharp(new Uint8Array([255, 0, 0, 0, 0, 255, 0, 0, 0, 0, 255, 0]), { raw: { width: 2, height: 2, channels: 3 } }).png({ palette: true, colours: 4, dither: 0 }).toBuffer();
  assert.equal((await sharp(viaSharp).metadata()).isPalette, true);
  assert.deepEqual([...(await decodeImage(viaSharp)).data], [255, 0, 0, 0, 0, 255, 0, 0, 0, 0, 255, 0]);
});

test('decode: greyscale 8-bit replicates every value 0..255 to (g, g, g)', async () => {
  const grey = Uint8Array.from({ length: 256 }, (_, i) => i);
  const png = await sharp(grey, { raw: { width: 16, height: 16, channels: 1 } }).toColourspace('b-w').png().toBuffer();
  assert.equal((await sharp(png).metadata()).channels, 1);
  const img = await decodeImage(png);
  assert.deepEqual([...img.data], [...grey].flatMap((g) => [g, g, g]));
});

test('decode: grey + alpha keeps grey, drops alpha', async () => {
  const la = bytes(6 * 2, 5);
  const want = [...la].filter((_, i) => i % 2 === 0).flatMap((g) => [g, g, g]);
  const viaSharp = await sharp(la, { raw: { width: 3, height: 2, channels: 2 } }).toColourspace('b-w').png().toBuffer();
  assert.equal((await sharp(viaSharp).metadata()).channels, 2);
  assert.deepEqual([...(await decodeImage(viaSharp)).data], want);
  assert.deepEqual([...(await decodeImage(makePng({ width: 3, height: 2, colourType: 4, bitDepth: 8, rows: la }))).data], want);
});

test('decode: 1/2/4-bit grey expands to 8 bits as PIL does (x255, x85, x17)', async () => {
  const one = await decodeImage(makePng({ width: 8, height: 1, colourType: 0, bitDepth: 1, rows: new Uint8Array([0b10110010]) }));
  assert.deepEqual([...one.data], [1, 0, 1, 1, 0, 0, 1, 0].flatMap((b) => [b * 255, b * 255, b * 255]));
  const two = await decodeImage(makePng({ width: 4, height: 1, colourType: 0, bitDepth: 2, rows: new Uint8Array([0b00011011]) }));
  assert.deepEqual([...two.data], [0, 1, 2, 3].flatMap((v) => [v * 85, v * 85, v * 85]));
  const four = await decodeImage(makePng({ width: 2, height: 1, colourType: 0, bitDepth: 4, rows: new Uint8Array([0x3f]) }));
  assert.deepEqual([...four.data], [3, 15].flatMap((v) => [v * 17, v * 17, v * 17]));
});

const SAMPLES16 = [0, 1, 255, 256, 257, 1000, 32767, 32768, 65280, 65534, 65535, 511];

test('decode: 16-bit RGB, RGBA and grey+alpha keep the high byte (PIL "RGB;16B"/"LA;16B")', async () => {
  const rgb = await decodeImage(makePng({ width: 4, height: 1, colourType: 2, bitDepth: 16, rows: be16(SAMPLES16) }));
  assert.deepEqual([...rgb.data], SAMPLES16.map((v) => v >> 8));
  const rgbaVals = [0, 256, 65535, 1, 32768, 513, 1000, 65535];
  const rgba = await decodeImage(makePng({ width: 2, height: 1, colourType: 6, bitDepth: 16, rows: be16(rgbaVals) }));
  assert.deepEqual([...rgba.data], [0, 1, 255, 128, 2, 3]);
  const laVals = [300, 7, 65535, 0, 255, 65535];
  const la = await decodeImage(makePng({ width: 3, height: 1, colourType: 4, bitDepth: 16, rows: be16(laVals) }));
  assert.deepEqual([...la.data], [1, 1, 1, 255, 255, 255, 0, 0, 0]);
  // sharp-made 16-bit RGB PNG
  const viaSharp = await sharp(Uint16Array.from(SAMPLES16), { raw: { width: 4, height: 1, channels: 3 } }).toColourspace('rgb16').png().toBuffer();
  assert.equal((await sharp(viaSharp).metadata()).depth, 'ushort');
  assert.deepEqual([...(await decodeImage(viaSharp)).data], SAMPLES16.map((v) => v >> 8));
});

test('decode: 16-bit grey without alpha clips to 0..255 (PIL mode "I" -> RGB), not >> 8', async () => {
  const want = SAMPLES16.flatMap((v) => { const c = Math.min(v, 255); return [c, c, c]; });
  const hand = await decodeImage(makePng({ width: 12, height: 1, colourType: 0, bitDepth: 16, rows: be16(SAMPLES16) }));
  assert.deepEqual([...hand.data], want);
  const viaSharp = await sharp(Uint16Array.from(SAMPLES16), { raw: { width: 6, height: 2, channels: 1 } }).toColourspace('grey16').png().toBuffer();
  assert.equal((await sharp(viaSharp).metadata()).depth, 'ushort');
  assert.deepEqual([...(await decodeImage(viaSharp)).data], want);
});

test('decode: EXIF orientation is NOT applied (as PIL Image.open): stored pixel grid, stored size', async () => {
  const w = 16, h = 8;
  const px = bytes(w * h * 3, 3);
  const plain = await sharp(px, { raw: { width: w, height: h, channels: 3 } }).jpeg({ quality: 95 }).toBuffer();
  const rotated = await sharp(plain).withMetadata({ orientation: 6 }).jpeg({ quality: 95 }).toBuffer();
  assert.equal((await sharp(rotated).metadata()).orientation, 6);
  const a = await decodeImage(plain);
  const b = await decodeImage(rotated);
  assert.equal(b.width, w);
  assert.equal(b.height, h);
  // re-encoding changes JPEG bytes, so compare with the tagged file's own unrotated decode
  const { data } = await sharp(rotated).removeAlpha().raw().toBuffer({ resolveWithObject: true });
  assert.deepEqual([...b.data], [...data]);
  assert.equal(a.width, w);
});

test('decode: an embedded ICC profile is ignored (PIL convert does not colour-manage)', async () => {
  const px = bytes(8 * 8 * 3, 9);
  const tagged = await sharp(px, { raw: { width: 8, height: 8, channels: 3 } }).withIccProfile('p3').png().toBuffer();
  assert.ok((await sharp(tagged).metadata()).icc, 'the test image carries a profile');
  const untagged = dropChunks(tagged, 'iCCP');
  assert.equal((await sharp(untagged).metadata()).icc, undefined);
  const stored = await decodeImage(untagged);
  assert.deepEqual([...(await decodeImage(tagged)).data], [...stored.data]);
  // sharp's default would convert the P3 values to sRGB: the test would catch a lost ignoreIcc
  const managed = await sharp(tagged).raw().toBuffer();
  assert.notDeepEqual([...managed], [...stored.data]);
});

test('decode: baseline and progressive JPEG decode at the original size to the same pixels', async () => {
  const px = bytes(33 * 17 * 3, 2);
  const raw = { raw: { width: 33, height: 17, channels: 3 as const } };
  const img = await decodeImage(await sharp(px, raw).jpeg({ quality: 100, chromaSubsampling: '4:4:4' }).toBuffer());
  assert.equal(img.width, 33);
  assert.equal(img.height, 17);
  assert.equal(img.data.length, 33 * 17 * 3);
  let maxErr = 0;
  for (let i = 0; i < px.length; i++) maxErr = Math.max(maxErr, Math.abs(img.data[i]! - px[i]!));
  assert.ok(maxErr < 64, `quality-100 JPEG stays near the source (max error ${maxErr})`);
  const prog = await decodeImage(await sharp(px, raw).jpeg({ quality: 100, chromaSubsampling: '4:4:4', progressive: true }).toBuffer());
  assert.deepEqual([prog.width, prog.height], [33, 17]);
});

test('decode: zero bytes, text, SVG and garbage are E_IMAGE_UNDECODABLE with a reason', async () => {
  await rejects(new Uint8Array(0), 'E_IMAGE_UNDECODABLE', /empty \(0 bytes\).*expected a PNG, JPEG/);
  await rejects(Buffer.from('hello, this is not an image'), 'E_IMAGE_UNDECODABLE', /not a readable image/);
  await rejects(Buffer.from('<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"/>'), 'E_IMAGE_UNDECODABLE', /format 'svg' is not accepted/);
  await rejects(bytes(4096, 4), 'E_IMAGE_UNDECODABLE', /not a readable image/);
});

test('decode: truncated PNG and JPEG are E_IMAGE_UNDECODABLE', async () => {
  const px = bytes(64 * 64 * 3, 8);
  const png = await sharp(px, { raw: { width: 64, height: 64, channels: 3 } }).png().toBuffer();
  const jpg = await sharp(px, { raw: { width: 64, height: 64, channels: 3 } }).jpeg().toBuffer();
  await rejects(png.subarray(0, png.length - 30), 'E_IMAGE_UNDECODABLE', /png data is corrupt or truncated|not a readable image/);
  await rejects(png.subarray(0, Math.floor(png.length / 2)), 'E_IMAGE_UNDECODABLE', /corrupt or truncated|not a readable image/);
  await rejects(jpg.subarray(0, Math.floor(jpg.length / 2)), 'E_IMAGE_UNDECODABLE', /jpeg data is corrupt or truncated/);
  await rejects(png.subarray(0, 20), 'E_IMAGE_UNDECODABLE', /not a readable image/);
});

test('decode: a side over 8192 is E_IMAGE_TOO_LARGE naming the size and the limit', async () => {
  assert.equal(MAX_IMAGE_SIDE, 8192);
  const wide = await sharp({ create: { width: MAX_IMAGE_SIDE + 1, height: 2, channels: 3, background: 'red' } }).png().toBuffer();
  await rejects(wide, 'E_IMAGE_TOO_LARGE', /8193x2 pixels; each side must be at most 8192/);
  const tall = await sharp({ create: { width: 1, height: MAX_IMAGE_SIDE + 1, channels: 3, background: 'red' } }).jpeg().toBuffer();
  await rejects(tall, 'E_IMAGE_TOO_LARGE', /1x8193 pixels/);
  const edge = await sharp({ create: { width: MAX_IMAGE_SIDE, height: 1, channels: 3, background: 'blue' } }).png().toBuffer();
  const ok = await decodeImage(edge);
  assert.equal(ok.width, MAX_IMAGE_SIDE);
  assert.deepEqual([...ok.data.subarray(0, 3)], [0, 0, 255]);
});

test('decode: more than 32 MiB of input is E_IMAGE_TOO_LARGE before any parsing', async () => {
  assert.equal(MAX_IMAGE_BYTES, 32 * 1024 * 1024);
  const big = Buffer.alloc(MAX_IMAGE_BYTES + 1);
  await rejects(big, 'E_IMAGE_TOO_LARGE', /33554433 bytes .*limit is 33554432 bytes/);
});

test('decode: a decompression bomb (tiny PNG declaring 20000x20000) is refused without allocating it', async () => {
  // 20000 rows of 60001 bytes (filter byte + 20000 RGB pixels), all zero: 1.2 GB raw, about 1.2 MB deflated.
  // Only the first rows are provided: a decoder that allocated the image would need 1.2 GB before failing.
  const row = Buffer.alloc(1 + 20000 * 3);
  const idat = zlib.deflateSync(Buffer.concat(Array.from({ length: 16 }, () => row)));
  const bomb = makePng({ width: 20000, height: 20000, colourType: 2, bitDepth: 8, idat });
  assert.ok(bomb.length < 10_000, `bomb is ${bomb.length} bytes`);
  const before = process.memoryUsage().rss;
  // The pixels' bytes are reserved right before any pixel is decoded: a refusal from the header never gets there.
  const reserved: number[] = [];
  await assert.rejects(decodeImage(bomb, { reserve: async (n) => void reserved.push(n) }), (e: unknown) => {
    assert.ok(isRfdetrError(e, 'E_IMAGE_TOO_LARGE'), String(e));
    assert.match(e.message, /20000x20000 pixels; each side must be at most 8192/);
    return true;
  });
  assert.deepEqual(reserved, [], 'refused from the header: no pixel memory was asked for and no decode started');
  assert.ok(process.memoryUsage().rss - before < 200 * 1024 * 1024, 'no 1.2 GB allocation');
  // Within the side limit but lying about its size: 8000x8000 with 16 rows of data -> undecodable, not a crash.
  const row8k = Buffer.alloc(1 + 8000 * 3);
  const short = makePng({ width: 8000, height: 8000, colourType: 2, bitDepth: 8, idat: zlib.deflateSync(Buffer.concat(Array.from({ length: 16 }, () => row8k))) });
  await rejects(short, 'E_IMAGE_UNDECODABLE', /corrupt or truncated/);
});

test('decode: lossless WebP, GIF and TIFF are accepted and decode to the stored pixels', async () => {
  const w = 9, h = 6;
  const px = bytes(w * h * 3, 21);
  const raw = { raw: { width: w, height: h, channels: 3 as const } };
  for (const buf of [await sharp(px, raw).webp({ lossless: true }).toBuffer(), await sharp(px, raw).tiff({ compression: 'lzw' }).toBuffer()]) {
    const img = await decodeImage(buf);
    assert.deepEqual([img.width, img.height], [w, h]);
    assert.deepEqual([...img.data], [...px]);
  }
  const flat = new Uint8Array(w * h * 3).fill(0);
  for (let i = 0; i < w * h; i++) flat.set(i % 2 ? [255, 0, 0] : [0, 0, 255], i * 3);
  const gif = await decodeImage(await sharp(flat, raw).gif().toBuffer());
  assert.deepEqual([...gif.data], [...flat]);
});

test('decode: a JPEG with bytes after EOI decodes (a warning, not an error, as in PIL); CMYK JPEG becomes RGB', async () => {
  const px = bytes(16 * 16 * 3, 22);
  const jpg = await sharp(px, { raw: { width: 16, height: 16, channels: 3 } }).jpeg().toBuffer();
  const clean = await decodeImage(jpg);
  const trailing = await decodeImage(Buffer.concat([jpg, Buffer.from('trailing garbage')]));
  assert.deepEqual([...trailing.data], [...clean.data]);
  const cmyk = await sharp(px, { raw: { width: 16, height: 16, channels: 3 } }).toColourspace('cmyk').jpeg().toBuffer();
  assert.equal((await sharp(cmyk).metadata()).space, 'cmyk');
  const img = await decodeImage(cmyk);
  assert.deepEqual([img.width, img.height, img.data.length], [16, 16, 16 * 16 * 3]);
});
