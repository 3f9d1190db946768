// encodedForSidecar: which files the server hands to the sidecar undecoded (SERVING.md, "Where images are
// decoded"): the sidecar's forms (header.ts sidecarForm), within the side limit, under the pixel thread's size.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import sharp from 'sharp';
import { encodedForSidecar, MAX_IMAGE_BYTES } from '../../src/image/decode.ts';
import { PIXEL_THREAD_MIN_BYTES } from '../../src/image/pixel-pool.ts';
import { isRfdetrError } from '../../src/errors.ts';
import { makePng } from './png-helper.ts';

const grey = (width: number, height: number) => sharp({ create: { width, height, channels: 3, background: { r: 90, g: 90, b: 90 } } });

test('encodedForSidecar: a small PNG or JPEG is the file itself with its header', async () => {
  for (const [format, bytes] of [['png', await grey(640, 480).png().toBuffer()], ['jpeg', await grey(640, 480).jpeg().toBuffer()]] as const) {
    const e = encodedForSidecar(bytes);
    assert.deepEqual(e && { ...e, bytes: undefined }, { format, width: 640, height: 480, bytes: undefined }, format);
    assert.equal(e!.bytes, bytes, `${format}: the same bytes, not a copy`);
  }
});

test('encodedForSidecar: pixels of PIXEL_THREAD_MIN_BYTES and more, a side past the limit, other forms and formats are left to the server', async () => {
  // The largest width at 1024 rows under the threshold, and the first at it.
  const under = Math.floor((PIXEL_THREAD_MIN_BYTES - 1) / (3 * 1024));
  const at = Math.ceil(PIXEL_THREAD_MIN_BYTES / (3 * 1024));
  assert.ok(encodedForSidecar(await grey(under, 1024).png().toBuffer()), `${under}x1024 goes to the sidecar`);
  assert.equal(encodedForSidecar(await grey(at, 1024).png().toBuffer()), undefined, `${at}x1024 is decoded here`);
  assert.equal(encodedForSidecar(await grey(at, 1024).jpeg().toBuffer()), undefined, `${at}x1024 JPEG is decoded here`);
  // A header declaring 8193x1 (decodeImage answers E_IMAGE_TOO_LARGE for it).
  assert.equal(encodedForSidecar(makePng({ width: 8193, height: 1, colourType: 2, bitDepth: 8 })), undefined, 'a side over 8192');
  assert.equal(encodedForSidecar(await grey(64, 48).png({ progressive: true }).toBuffer()), undefined, 'interlaced PNG');
  assert.equal(encodedForSidecar(await grey(64, 48).toColourspace('cmyk').jpeg().toBuffer()), undefined, 'CMYK JPEG');
  assert.equal(encodedForSidecar(await grey(64, 48).webp().toBuffer()), undefined, 'WebP');
  assert.equal(encodedForSidecar(Buffer.from('not an image')), undefined, 'text');
});

test('encodedForSidecar: empty and oversized inputs throw as decodeImage does', () => {
  const code = (f: () => unknown) => {
    try {
      f();
    } catch (e) {
      return isRfdetrError(e) ? e.code : String(e);
    }
    return 'returned';
  };
  assert.equal(code(() => encodedForSidecar(Buffer.alloc(0))), 'E_IMAGE_UNDECODABLE');
  assert.equal(code(() => encodedForSidecar(Buffer.alloc(MAX_IMAGE_BYTES + 1))), 'E_IMAGE_TOO_LARGE');
});
