import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import sharp from 'sharp';
import { readImageHeader } from '../../src/image/header.ts';
import { testFixturesDir } from '../../src/config/paths.ts';
import { makePng } from './png-helper.ts';

function noise(n: number, seed: number): Buffer {
  const out = Buffer.alloc(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out[i] = s >>> 24;
  }
  return out;
}

/** The header must say what sharp's metadata() says, or nothing. */
async function agreesWithSharp(bytes: Buffer, what: string): Promise<'read' | 'left to sharp'> {
  const h = readImageHeader(bytes);
  if (!h) return 'left to sharp';
  const m = await sharp(bytes).metadata();
  assert.deepEqual(h, { format: m.format, width: m.width, height: m.height }, what);
  return 'read';
}

test('header: PNG of every colour type and depth, interlaced or not, and JPEG of every kind read as sharp reads them', async () => {
  const cases: Array<[string, Buffer]> = [];
  for (const [w, h] of [[1, 1], [7, 5], [300, 2], [2, 4097]] as const) {
    const raw = { raw: { width: w, height: h, channels: 3 as const } };
    const px = noise(w * h * 3, w * 31 + h);
    cases.push([`rgb png ${w}x${h}`, await sharp(px, raw).png().toBuffer()]);
    cases.push([`interlaced png ${w}x${h}`, await sharp(px, raw).png({ progressive: true }).toBuffer()]);
    cases.push([`palette png ${w}x${h}`, await sharp(px, raw).png({ palette: true }).toBuffer()]);
    cases.push([`16-bit rgb png ${w}x${h}`, await sharp(px, raw).toColourspace('rgb16').png().toBuffer()]);
    cases.push([`baseline jpeg ${w}x${h}`, await sharp(px, raw).jpeg().toBuffer()]);
    cases.push([`progressive jpeg ${w}x${h}`, await sharp(px, raw).jpeg({ progressive: true }).toBuffer()]);
    cases.push([`grey jpeg ${w}x${h}`, await sharp(px, raw).greyscale().jpeg().toBuffer()]);
    cases.push([`cmyk jpeg ${w}x${h}`, await sharp(px, raw).toColourspace('cmyk').jpeg().toBuffer()]);
    cases.push([`jpeg with exif ${w}x${h}`, await sharp(px, raw).withMetadata({ orientation: 6 }).jpeg().toBuffer()]);
  }
  for (const [colourType, bitDepth, channels] of [[0, 1, 1], [0, 2, 1], [0, 4, 1], [0, 8, 1], [4, 8, 2], [4, 16, 2], [6, 8, 4], [6, 16, 4], [2, 16, 3]] as const) {
    const rowBytes = Math.ceil((5 * channels * bitDepth) / 8);
    cases.push([`hand-made png type ${colourType} depth ${bitDepth}`, makePng({ width: 5, height: 3, colourType, bitDepth, rows: noise(rowBytes * 3, bitDepth) })]);
  }
  for (const c of ['case-1', 'case-2', 'case-3']) {
    const f = path.join(testFixturesDir, 'rfdetr-synth', c, 'input.png');
    if (fs.existsSync(f)) cases.push([`fixture ${c}`, fs.readFileSync(f)]);
  }
  for (const [what, bytes] of cases) assert.equal(await agreesWithSharp(bytes, what), 'read', `${what} is read here`);
});

test('header: the cases with their own decode path or an unusual header are left to sharp', async () => {
  // 16-bit grey: decode.ts's clipping path; sharp says whether a tRNS chunk gives it an alpha band.
  const grey16 = makePng({ width: 3, height: 2, colourType: 0, bitDepth: 16, rows: noise(12, 3) });
  assert.equal(readImageHeader(grey16), undefined);
  // A 12-bit JPEG frame header (SOF1, precision 12), a height left to a DNL marker, a scan before any frame.
  const sof = (precision: number, height: number) => Buffer.from([0xff, 0xd8, 0xff, 0xc1, 0, 11, precision, height >> 8, height & 255, 0, 16, 1, 1, 0x11, 0]);
  assert.deepEqual(readImageHeader(sof(8, 9)), { format: 'jpeg', width: 16, height: 9 });
  assert.equal(readImageHeader(sof(12, 9)), undefined);
  assert.equal(readImageHeader(sof(8, 0)), undefined);
  assert.equal(readImageHeader(Buffer.from([0xff, 0xd8, 0xff, 0xda, 0, 2])), undefined);
  // Other formats, garbage, truncated headers.
  const webp = await sharp(noise(12, 1), { raw: { width: 2, height: 2, channels: 3 } }).webp().toBuffer();
  assert.equal(readImageHeader(webp), undefined);
  assert.equal(readImageHeader(noise(4096, 9)), undefined);
  const png = await sharp(noise(12, 1), { raw: { width: 2, height: 2, channels: 3 } }).png().toBuffer();
  for (const n of [0, 8, 20, 32]) assert.equal(readImageHeader(png.subarray(0, n)), undefined, `PNG cut to ${n} bytes`);
  assert.deepEqual(readImageHeader(png.subarray(0, 33)), { format: 'png', width: 2, height: 2 });
  const jpg = await sharp(noise(12, 1), { raw: { width: 2, height: 2, channels: 3 } }).jpeg().toBuffer();
  for (const n of [0, 2, 3, 100]) assert.equal(readImageHeader(jpg.subarray(0, n)), undefined, `JPEG cut to ${n} bytes`);
});
