import { test } from 'node:test';
import assert from 'node:assert/strict';
import { countBatchImages, extractJsonImage } from '../../src/http/json-image.ts';
import { decodeBase64Image } from '../../src/http/params.ts';

const MAX = 32 * 1024 * 1024;
const png = Buffer.from(Array.from({ length: 3000 }, (_, i) => (i * 7919) % 256));
const b64 = png.toString('base64');

/** What the full path makes of a body: JSON.parse, then the image field's base64 rules; or the error. */
function fullPath(body: string): { fields: Record<string, unknown>; image: Buffer } | 'error' {
  try {
    const { image, ...fields } = JSON.parse(body) as Record<string, unknown>;
    return { fields: { ...fields, image: '' }, image: decodeBase64Image(image, MAX) };
  } catch {
    return 'error';
  }
}

test('json-image: the plain body takes the fast path and gives what the full parse gives', () => {
  for (const body of [
    JSON.stringify({ image: b64 }),
    JSON.stringify({ image: b64, threshold: 0.3, classes: ['cat', 17] }),
    JSON.stringify({ threshold: 0.3, nested: { a: [1, { image: 'AAAA' }] }, text: 'a "quoted \\" image" : x', image: b64, max_detections: 5 }),
    ` \n {  "image" :  "${b64}" , "return_raw": true }  `,
    JSON.stringify({ image: png.subarray(0, 2999).toString('base64') }), // '=' padding
    JSON.stringify({ path: 'C:\\dir\\', note: '\\"image\\":', image: b64 }), // a string ending in an escaped backslash, escaped quotes
  ]) {
    const quick = extractJsonImage(Buffer.from(body), MAX);
    assert.ok(quick, `fast path for ${body.slice(0, 60)}…`);
    assert.deepEqual(quick, fullPath(body));
  }
});

test('json-image: every other body is left to the full parse (undefined), never answered differently', () => {
  const cases = [
    JSON.stringify({ a: { image: b64 }, image: 'AAAA' }), // a nested image first: the top-level one is taken or none
    `{"image":"${b64}","image":"AAAA"}`, // duplicate key: JSON.parse takes the last
    `{"image":"${b64}","image":""}`,
    JSON.stringify({ image: `data:image/png;base64,${b64}` }),
    JSON.stringify({ image: b64.replace(/(.{76})/g, '$1\n') }), // escaped newlines
    `{"image":"${b64.slice(0, 76)}\n${b64.slice(76)}"}`, // a raw newline: not valid JSON
    JSON.stringify({ image: b64.slice(0, -2) }), // unpadded
    JSON.stringify({ image: `${b64.slice(0, 100)}!${b64.slice(101)}` }),
    JSON.stringify({ image: '' }),
    JSON.stringify({ image: 42 }),
    JSON.stringify({ images: [b64] }),
    `{"image":"${b64}"`, // truncated
    `{"image":"${b64}", }`, // trailing comma
    `\ufeff{"image":"${b64}"`, // a BOM, then truncated
    `["image", "${b64}"]`,
    `{"x":"\\"image\\":\\"${b64}\\""}`,
    '',
    JSON.stringify({ images: [b64], return_image: 'png' }), // a quote closer to the end than the key is long
    '{"a":"',
    `{"\\u0069mage":"AAAA","image":"${b64}"}`, // an escaped duplicate key: JSON.parse takes the last
    `{"image":"${b64}","\\u0069mage":"AAAA"}`,
    `{"image":"${b64}","\\u0069mages":["AAAA"]}`, // taken, with "images" among its fields: body.ts then parses it whole
  ];
  for (const body of cases) {
    const quick = extractJsonImage(Buffer.from(body), MAX);
    if (quick) assert.deepEqual(quick, fullPath(body), `same answer for ${body.slice(0, 60)}…`);
    else assert.equal(quick, undefined);
  }
  // The clearly-not-plain ones must not take the fast path at all.
  for (const i of [1, 2, 3, 4, 5, 6, 7, 11, 12, 15, 20]) assert.equal(extractJsonImage(Buffer.from(cases[i]!), MAX), undefined, `case ${i}`);
  // Over the image limit: left to the full path (which words the 400).
  assert.equal(extractJsonImage(Buffer.from(JSON.stringify({ image: b64 })), 100), undefined);
});

test('json-image: base64 that Node decodes but the full path refuses is left to it, in any 64 KB piece', () => {
  // 200 kB of image: its base64 spans four of the pieces the fast path decodes at a time.
  const big = Buffer.from(Array.from({ length: 200_000 }, (_, i) => (i * 7919 + (i >> 9)) % 256));
  const text = big.toString('base64');
  const at = (i: number, c: string) => `${text.slice(0, i)}${c}${text.slice(i + 1)}`;
  const refused: string[] = [];
  for (const i of [0, 5, 65535, 65536, 70000, text.length - 5]) {
    refused.push(at(i, '-'), at(i, '_'), at(i, '='), at(i, '*'), at(i, '\u00e9'), `${text.slice(0, i)}\u00e9${text.slice(i + 2)}`);
  }
  refused.push(`AA==${text.slice(4)}`, `${text.slice(0, 100)}A=${text.slice(102)}`);
  for (const image of refused) {
    const body = JSON.stringify({ image });
    assert.equal(fullPath(body), 'error', `the full path refuses ${image.slice(0, 20)}…`);
    assert.equal(extractJsonImage(Buffer.from(body), MAX), undefined, `fast path refuses what the full path refuses (${image.length} chars)`);
  }
  // What the full path accepts, the fast path answers the same: multi-piece, both paddings, and the
  // non-canonical last quantum (trailing bits set), which both paths decode to the same bytes.
  for (const image of [text, big.subarray(0, 199_999).toString('base64'), big.subarray(0, 199_998).toString('base64'), 'QR==', 'QUI=', 'QUJ=']) {
    const body = JSON.stringify({ image, threshold: 0.4 });
    const quick = extractJsonImage(Buffer.from(body), MAX);
    assert.ok(quick, `fast path for ${image.slice(-8)}`);
    assert.deepEqual(quick, fullPath(body));
  }
});

test('countBatchImages: the items of a plain top-level images array, else undefined (the full parse decides)', () => {
  const count = (body: string) => countBatchImages(Buffer.from(body));
  assert.equal(count(JSON.stringify({ images: [b64, b64, 'AAAA'] })), 3);
  assert.equal(count(` { "threshold" : 0.3, "images" : [ "${b64}" , "x\\"y" ], "note": "\\\\", "classes": ["cat"] } `), 2);
  assert.equal(count(JSON.stringify({ images: [] })), 0);
  for (const body of [
    JSON.stringify({ a: { images: [b64] } }), // nested only
    JSON.stringify({ images: [b64], image: b64 }),
    JSON.stringify({ images: [b64], image_url: 'http://x/' }),
    JSON.stringify({ images: [b64, 7] }),
    JSON.stringify({ images: [[b64]] }),
    `{"images":["a"],"images":["b","c"]}`,
    `{"images":["a"]} x`,
    `{"images":["a"]`,
    `["images", "a"]`,
    JSON.stringify({ image: b64 }),
  ]) {
    assert.equal(count(body), undefined, body.slice(0, 60));
  }
});

test('json-image: a UTF-8 BOM is ignored by both fast paths as by the full parse: the same answer, and no fall back to the full parse', () => {
  const BOM = '\ufeff';
  const plain = [
    JSON.stringify({ image: b64, threshold: 0.3 }),
    ` \n {  "image" :  "${b64}" , "return_raw": true }  `,
  ];
  for (const body of plain) {
    const quick = extractJsonImage(Buffer.from(BOM + body), MAX);
    assert.ok(quick, `the fast path takes ${JSON.stringify(body.slice(0, 30))} after a BOM`);
    assert.deepEqual(quick, fullPath(body));
  }
  const batches = [JSON.stringify({ images: [b64, b64, 'AAAA'] }), ` { "images" : [ "${b64}" ], "threshold": 0.3 } `, JSON.stringify({ images: [] })];
  for (const body of batches) {
    const n = countBatchImages(Buffer.from(BOM + body));
    assert.equal(n, (JSON.parse(body) as { images: unknown[] }).images.length, `the quick count of ${JSON.stringify(body.slice(0, 30))} after a BOM`);
  }
  // A BOM is ignored once, at the start only (as JSON.parse after express.json's strip): two, or one later, are refused by both.
  for (const body of [BOM + BOM + plain[0]!, ` ${BOM}${plain[0]!}`]) {
    assert.equal(extractJsonImage(Buffer.from(body), MAX), undefined);
    assert.throws(() => JSON.parse(body.startsWith(BOM) ? body.slice(1) : body));
  }
  assert.equal(countBatchImages(Buffer.from(BOM + BOM + batches[0]!)), undefined);
});

test('countBatchImages: a top-level key with an escape ("\\u0069mages" is "images") is left to the full parse, so the quick count never disagrees with it', () => {
  const bodies = [
    `{"images":["a","b","c"],"\\u0069mages":["x"]}`, // JSON.parse: the last "images", 1 item
    `{"\\u0069mages":["a","b","c"],"images":["x"]}`,
    `{"images":["a"],"\\u0069mage":"${b64}"}`, // an image beside the batch, spelled with an escape
    `{"images":["a"],"\\u0069mage_url":"http://x/"}`,
    `{"images":["a","b"],"thr\\u0065shold":0.3}`,
  ];
  for (const body of bodies) {
    assert.equal(countBatchImages(Buffer.from(body)), undefined, body);
    JSON.parse(body); // each is valid JSON: the full parse, not the quick count, answers it
  }
  // Escapes inside the array's strings (not keys) are counted as before.
  assert.equal(countBatchImages(Buffer.from(`{"images":["a\\u0022","\\\\"]}`)), 2);
});

test('json-image: a body with bytes that are not UTF-8 around the image is left to the full parse (which refuses it), never read with U+FFFD in their place', () => {
  const head = Buffer.from('{"classes":["c');
  const tail = Buffer.from(`at"],"image":"${b64}"}`);
  const body = Buffer.concat([head, Buffer.from([0xff]), tail]);
  assert.equal(extractJsonImage(body, MAX), undefined);
  assert.ok(extractJsonImage(Buffer.concat([head, tail]), MAX), 'the same body in UTF-8 takes the fast path');
});
