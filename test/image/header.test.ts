import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import sharp from 'sharp';
import { readImageHeader, sidecarForm } from '../../src/image/header.ts';
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

test('sidecarForm: plain PNGs and 8-bit 1- or 3-component JPEGs, with the header readImageHeader reads; the rest undefined', async () => {
  const raw = { raw: { width: 7, height: 5, channels: 3 as const } };
  const px = noise(7 * 5 * 3, 11);
  const rgba = { raw: { width: 7, height: 5, channels: 4 as const } };
  const taken: Array<[string, Buffer]> = [
    ['rgb png', await sharp(px, raw).png().toBuffer()],
    ['rgba png', await sharp(noise(7 * 5 * 4, 12), rgba).png().toBuffer()],
    ['palette png', await sharp(px, raw).png({ palette: true }).toBuffer()],
    ['16-bit rgb png', await sharp(px, raw).toColourspace('rgb16').png().toBuffer()],
    ['baseline jpeg', await sharp(px, raw).jpeg().toBuffer()],
    ['progressive jpeg', await sharp(px, raw).jpeg({ progressive: true }).toBuffer()],
    ['grey jpeg', await sharp(px, raw).greyscale().jpeg().toBuffer()],
  ];
  // Hand-made: every colour type and depth but the low-depth greys (and 16-bit grey, left to sharp anyway).
  for (const [colourType, bitDepth, channels] of [[0, 8, 1], [2, 8, 3], [2, 16, 3], [3, 1, 1], [3, 2, 1], [3, 4, 1], [3, 8, 1], [4, 8, 2], [4, 16, 2], [6, 8, 4], [6, 16, 4]] as const) {
    const rowBytes = Math.ceil((5 * channels * bitDepth) / 8);
    const palette = colourType === 3 ? noise(3 * 256, 5) : undefined;
    const rows = colourType === 3 ? Buffer.alloc(rowBytes * 3) : noise(rowBytes * 3, bitDepth);
    taken.push([`png type ${colourType} depth ${bitDepth}`, makePng({ width: 5, height: 3, colourType, bitDepth, rows, ...(palette ? { palette } : {}) })]);
  }
  for (const [what, bytes] of taken) {
    assert.ok(readImageHeader(bytes), `${what}: readImageHeader reads it`);
    assert.deepEqual(sidecarForm(bytes), readImageHeader(bytes), `${what}: taken by the sidecar, with the same header`);
  }
  const left: Array<[string, Buffer]> = [
    ['interlaced png', await sharp(px, raw).png({ progressive: true }).toBuffer()],
    ['interlaced palette png', await sharp(px, raw).png({ progressive: true, palette: true }).toBuffer()],
    ['cmyk jpeg', await sharp(px, raw).toColourspace('cmyk').jpeg().toBuffer()],
    ['1-bit grey png', makePng({ width: 5, height: 3, colourType: 0, bitDepth: 1, rows: noise(3, 1) })],
    ['2-bit grey png', makePng({ width: 5, height: 3, colourType: 0, bitDepth: 2, rows: noise(6, 2) })],
    ['4-bit grey png', makePng({ width: 5, height: 3, colourType: 0, bitDepth: 4, rows: noise(9, 4) })],
  ];
  for (const [what, bytes] of left) {
    assert.ok(readImageHeader(bytes), `${what}: readImageHeader reads it (only the sidecar leaves it)`);
    assert.equal(sidecarForm(bytes), undefined, `${what}: decoded by the server`);
  }
  // A JPEG frame header with 2 or 4 components, and what readImageHeader leaves to sharp.
  const sof = (components: number) => Buffer.from([0xff, 0xd8, 0xff, 0xc0, 0, 8 + 3 * components, 8, 0, 9, 0, 16, components, ...Array.from({ length: components }, (_, k) => [k + 1, 0x11, 0]).flat()]);
  assert.deepEqual(sidecarForm(sof(1)), { format: 'jpeg', width: 16, height: 9 });
  assert.deepEqual(sidecarForm(sof(3)), { format: 'jpeg', width: 16, height: 9 });
  for (const n of [2, 4]) assert.equal(sidecarForm(sof(n)), undefined, `a ${n}-component JPEG`);
  assert.equal(sidecarForm(makePng({ width: 3, height: 2, colourType: 0, bitDepth: 16, rows: noise(12, 3) })), undefined, '16-bit grey png');
  const webp = await sharp(px, raw).webp().toBuffer();
  assert.equal(sidecarForm(webp), undefined, 'webp');
});
