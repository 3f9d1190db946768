// The /predict schema helpers on their own: base64 tolerance and rejection, size before decoding, bounds.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { base64DecodedLength, decodeBase64Image, parsePredictParams } from '../../src/http/params.ts';
import { bodyLimitFor } from '../../src/http/body.ts';

test('base64: data: prefix, CRLF/space wrapping and missing padding are tolerated', () => {
  const bytes = Buffer.from(Array.from({ length: 200 }, (_, i) => i));
  const b = bytes.toString('base64');
  assert.deepEqual(decodeBase64Image(b, 1000), bytes);
  assert.deepEqual(decodeBase64Image(`data:image/png;base64,${b}`, 1000), bytes);
  assert.deepEqual(decodeBase64Image(b.replace(/(.{60})/g, '$1\r\n'), 1000), bytes);
  assert.deepEqual(decodeBase64Image(` ${b.replace(/(.{10})/g, '$1 ')}\n`, 1000), bytes);
  assert.deepEqual(decodeBase64Image(Buffer.from('ab').toString('base64').replace(/=+$/, ''), 10), Buffer.from('ab'));
});

test('base64: the decoded size is computed exactly and checked before decoding', () => {
  for (const n of [0, 1, 2, 3, 4, 5, 100, 101, 102]) {
    assert.equal(base64DecodedLength(Buffer.alloc(n).toString('base64')), n, `n=${n}`);
  }
  const b = Buffer.alloc(101).toString('base64');
  assert.equal(decodeBase64Image(b, 101).length, 101);
  assert.throws(() => decodeBase64Image(b, 100), (e: any) => e.code === 'E_IMAGE_TOO_LARGE' && /101 bytes after base64 decoding; the limit is 100 bytes/.test(e.message));
});

test('base64: non-canonical trailing bits are accepted (as Python\'s b64decode does); URL-safe characters are not', () => {
  assert.deepEqual(decodeBase64Image('QR==', 10), Buffer.from('A'));
  assert.deepEqual(decodeBase64Image('QR', 10), Buffer.from('A'));
  assert.throws(() => decodeBase64Image('ab-_', 10), /character "-" at offset 2/);
  assert.throws(() => decodeBase64Image('QUJ!RA==', 10), /character "!" at offset 3/);
  assert.throws(() => decodeBase64Image('====', 10), /not valid base64/);
});

test('base64: malformed input names the problem', () => {
  assert.throws(() => decodeBase64Image('abc$', 100), /character "\$" at offset 3/);
  assert.throws(() => decodeBase64Image('ab=c', 100), /misplaced '=' padding/);
  assert.throws(() => decodeBase64Image('abcde', 100), /not valid base64/);
  assert.throws(() => decodeBase64Image('', 100), (e: any) => e.code === 'E_IMAGE_UNDECODABLE' && /empty/.test(e.message));
  assert.throws(() => decodeBase64Image(undefined, 100), (e: any) => e.code === 'E_SCHEMA');
  assert.throws(() => decodeBase64Image(['x'], 100), /received an array of length 1/);
});

test('params: JSON types are strict, text forms parse numbers and booleans', () => {
  assert.deepEqual(parsePredictParams({}, false), { threshold: 0.5, max_detections: 100, return_raw: false, fast_decode: false, mask_format: 'rle' });
  assert.deepEqual(parsePredictParams({ threshold: '0.25', max_detections: '300', return_raw: 'TRUE', fast_decode: '1', mask_format: 'polygon' }, true), { threshold: 0.25, max_detections: 300, return_raw: true, fast_decode: true, mask_format: 'polygon' });
  assert.throws(() => parsePredictParams({ threshold: '0.25' }, false), /for threshold but received "0.25" of type string/);
  assert.throws(() => parsePredictParams({ threshold: 'Infinity' }, true), /for threshold/);
  assert.throws(() => parsePredictParams({ threshold: '' }, true), /for threshold/);
  assert.equal(parsePredictParams({ max_detections: '1e2' }, true).max_detections, 100);
  assert.throws(() => parsePredictParams({ max_detections: '10.5' }, true), /for max_detections but received "10.5"/);
  assert.throws(() => parsePredictParams({ max_detections: '0x10' }, true), /for max_detections/);
  assert.throws(() => parsePredictParams({ return_raw: 1 }, false), /for return_raw but received 1 of type number/);
});

test('the JSON body limit fits a 32 MiB image as line-wrapped base64 with a data: prefix', () => {
  const max = 32 * 1024 * 1024;
  const wrappedLen = Math.ceil(max / 3) * 4 * (78 / 76);
  const limit = bodyLimitFor(max);
  assert.ok(limit > wrappedLen + 1000, `${limit} vs ${wrappedLen}`);
  assert.ok(limit < 52 * 1024 * 1024, 'and not much more');
});
