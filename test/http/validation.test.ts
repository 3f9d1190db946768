// The contract's defaults and bounds, the error bodies (what was wrong, what was expected), and a hostile
// input set: each answered with the right 4xx while the server keeps serving.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import zlib from 'node:zlib';
import sharp from 'sharp';
import { goldens, postJson, start, u8, type Started } from './helpers.ts';

// The two bodies of tens of MB, built before the server starts (postJson says why).
const IMAGE_33MB = u8(Buffer.from(JSON.stringify({ image: Buffer.alloc(33 * 1024 * 1024, 7).toString('base64') })));
const OVER_BODY_LIMIT = u8(Buffer.from(`{"image":"${'A'.repeat(51 * 1024 * 1024)}"}`));

let s: Started;
let png: string;
before(async () => {
  s = await start();
  png = goldens()[0]!.png.toString('base64');
});
after(() => s.stop());

function assertError(r: { status: number; json: any; text: string }, status: number, code: string, detail: RegExp) {
  assert.equal(r.status, status, r.text);
  assert.equal(r.json?.code, code, r.text);
  assert.match(r.json.detail, detail);
  assert.equal(typeof r.json.request_id, 'string');
}

describe('schema (422) and defaults', () => {
  const cases: Array<[string, Record<string, unknown>, RegExp]> = [
    ['threshold NaN (as a string)', { threshold: 'NaN' }, /Expected a number between 0 and 1 .* for threshold but received "NaN" of type string/],
    ['threshold -0.1', { threshold: -0.1 }, /for threshold but received -0\.1 of type number/],
    ['threshold 1.1', { threshold: 1.1 }, /for threshold but received 1\.1 of type number/],
    ['threshold null', { threshold: null }, /for threshold but received null/],
    ['max_detections 0', { max_detections: 0 }, /Expected an integer between 1 and 300 .* for max_detections but received 0 of type number/],
    ['max_detections 301', { max_detections: 301 }, /for max_detections but received 301/],
    ['max_detections 1.5', { max_detections: 1.5 }, /for max_detections but received 1\.5/],
    ['max_detections "10"', { max_detections: '10' }, /for max_detections but received "10" of type string/],
    ['return_raw "yes"', { return_raw: 'yes' }, /Expected a boolean .* for return_raw but received "yes"/],
    ['mask_format "bitmap"', { mask_format: 'bitmap' }, /Expected "rle", "polygon" or "none" \(default "rle"\) for mask_format but received "bitmap" of type string/],
  ];
  for (const [name, extra, re] of cases) {
    test(`${name} → 422 E_SCHEMA naming the field`, async () => {
      const r = await postJson(s.url, { image: png, ...extra });
      assertError(r, 422, 'E_SCHEMA', re);
      assert.ok(['threshold', 'max_detections', 'return_raw', 'mask_format'].includes(r.json.field));
    });
  }

  test('a detection model accepts mask_format and ignores it: no mask keys, the same detections', async () => {
    const plain = await postJson(s.url, { image: png });
    assert.equal(plain.status, 200, plain.text);
    assert.ok(plain.json.detections.length > 0);
    for (const mask_format of ['rle', 'polygon', 'none']) {
      const r = await postJson(s.url, { image: png, mask_format });
      assert.equal(r.status, 200, r.text);
      assert.deepEqual(r.json.detections, plain.json.detections, mask_format);
      assert.ok(r.json.detections.every((d: object) => !('mask' in d)), mask_format);
    }
  });

  test('missing image → 422', async () => {
    const r = await postJson(s.url, { threshold: 0.5 });
    assertError(r, 422, 'E_SCHEMA', /Expected a base64 string .* for image but received nothing \(the field is missing\)/);
    assert.equal(r.json.field, 'image');
  });

  test('image as a number → 422', async () => {
    const r = await postJson(s.url, { image: 12345 });
    assertError(r, 422, 'E_SCHEMA', /for image but received 12345 of type number/);
  });

  test('a JSON array body → 422; malformed JSON → 422', async () => {
    assertError(await postJson(s.url, [1, 2]), 422, 'E_SCHEMA', /Expected a JSON object .* for the request body but received an array/);
    assertError(await postJson(s.url, '{"image": '), 422, 'E_SCHEMA', /not valid JSON/);
  });

  test('bounds are inclusive: threshold 0 and 1, max_detections 1 and 300 are accepted', async () => {
    for (const extra of [{ threshold: 0 }, { threshold: 1 }, { max_detections: 1 }, { max_detections: 300 }, { return_raw: false }]) {
      const r = await postJson(s.url, { image: png, ...extra });
      assert.equal(r.status, 200, `${JSON.stringify(extra)}: ${r.text}`);
    }
    const r1 = await postJson(s.url, { image: png, threshold: 1 });
    assert.equal(r1.json.num_detections, 0, 'score > 1 is never true');
    const r0 = await postJson(s.url, { image: png, threshold: 0, max_detections: 300 });
    assert.equal(r0.json.num_detections, 300);
  });

  test('defaults: threshold 0.5, max_detections 100, return_raw false', async () => {
    const r = await postJson(s.url, { image: png });
    assert.equal(r.status, 200);
    assert.equal(r.json.threshold, 0.5);
    assert.equal(r.json.num_detections, goldens()[0]!.detections['0.5']!.length);
    assert.equal(r.json.raw, undefined);
    const r0 = await postJson(s.url, { image: png, threshold: 0 });
    assert.equal(r0.json.num_detections, 100);
  });

  test('multipart and query-string fields are validated the same way', async () => {
    const fd = new FormData();
    fd.append('image', new Blob([u8(goldens()[0]!.png)]), 'x.png');
    fd.append('max_detections', '0');
    const res = await fetch(`${s.url}/predict`, { method: 'POST', body: fd });
    assert.equal(res.status, 422);
    assert.match(((await res.json()) as any).detail, /for max_detections but received "0"/);
    const raw = await fetch(`${s.url}/predict?threshold=1.1`, { method: 'POST', headers: { 'content-type': 'image/png' }, body: u8(goldens()[0]!.png) });
    assert.equal(raw.status, 422);
    assert.match(((await raw.json()) as any).detail, /for threshold but received "1\.1"/);
    const noImage = new FormData();
    noImage.append('threshold', '0.4');
    const r3 = await fetch(`${s.url}/predict`, { method: 'POST', body: noImage });
    assert.equal(r3.status, 422);
    assert.match(((await r3.json()) as any).detail, /file part named "image"/);
  });

  test('multipart: a base64 text field "image" works; a file under another name and a repeated field are 422', async () => {
    const fd = new FormData();
    fd.append('image', png);
    fd.append('return_raw', 'false');
    const ok = await fetch(`${s.url}/predict`, { method: 'POST', body: fd });
    assert.equal(ok.status, 200);
    assert.equal(((await ok.json()) as any).num_detections, goldens()[0]!.detections['0.5']!.length);
    const wrong = new FormData();
    wrong.append('picture', new Blob([u8(goldens()[0]!.png)]), 'x.png');
    const r1 = await fetch(`${s.url}/predict`, { method: 'POST', body: wrong });
    assert.equal(r1.status, 422);
    assert.match(((await r1.json()) as any).detail, /Expected the file part to be named "image" but received a file part named "picture"/);
    const twice = new FormData();
    twice.append('image', new Blob([u8(goldens()[0]!.png)]), 'x.png');
    twice.append('threshold', '0.1');
    twice.append('threshold', '0.2');
    const r2 = await fetch(`${s.url}/predict`, { method: 'POST', body: twice });
    assert.equal(r2.status, 422);
    assert.match(((await r2.json()) as any).detail, /field "threshold" is given twice/);
  });

  test('an unknown field (a misspelt one) → 422 naming it and the known fields, in every body form', async () => {
    const json = await postJson(s.url, { image: png, max_detection: 3 });
    assertError(json, 422, 'E_SCHEMA', /Unknown field max_detection \(received 3 of type number\): expected only the fields image, threshold, max_detections, .*check the spelling/);
    assert.equal(json.json.field, 'max_detection');
    for (const body of [{ image_url: 'http://127.0.0.1/x.png', thresold: 0.2 }, { images: [png], thresold: 0.2 }]) {
      assertError(await postJson(s.url, body), 422, 'E_SCHEMA', /Unknown field thresold/);
    }
    const long = await postJson(s.url, { image: png, ['k'.repeat(100_000)]: 1 });
    assertError(long, 422, 'E_SCHEMA', /Unknown field k{40}… /);
    assert.ok(long.text.length < 2000, `the long name is not echoed whole (${long.text.length} characters)`);
    const fd = new FormData();
    fd.append('image', new Blob([u8(goldens()[0]!.png)]), 'x.png');
    fd.append('treshold', '0.3');
    const mp = await fetch(`${s.url}/predict`, { method: 'POST', body: fd });
    assert.equal(mp.status, 422);
    assert.match(((await mp.json()) as any).detail, /Unknown field treshold \(received "0\.3" of type string\)/);
    const raw = await fetch(`${s.url}/predict?max=3`, { method: 'POST', headers: { 'content-type': 'image/png' }, body: u8(goldens()[0]!.png) });
    assert.equal(raw.status, 422);
    assert.match(((await raw.json()) as any).detail, /Unknown field max /);
  });

  test('unsupported Content-Type → 415 naming the accepted types', async () => {
    const res = await fetch(`${s.url}/predict`, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'hello' });
    const body: any = await res.json();
    assert.equal(res.status, 415);
    assert.equal(body.code, 'E_UNSUPPORTED_MEDIA');
    assert.match(body.detail, /Expected Content-Type application\/json, multipart\/form-data, image\/\* .* but received "text\/plain"/);
  });
});

/** A PNG whose header claims width × height, followed by a small deflate stream (never fully inflated). */
function pngBomb(width: number, height: number): Buffer {
  const crcTable = Array.from({ length: 256 }, (_, n) => {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c >>> 0;
  });
  const crc = (b: Buffer) => {
    let c = 0xffffffff;
    for (const x of b) c = crcTable[(c ^ x) & 0xff]! ^ (c >>> 8);
    return (c ^ 0xffffffff) >>> 0;
  };
  const chunk = (type: string, data: Buffer) => {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(data.length);
    const td = Buffer.concat([Buffer.from(type, 'ascii'), data]);
    const c = Buffer.alloc(4);
    c.writeUInt32BE(crc(td));
    return Buffer.concat([len, td, c]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = 2; // RGB
  // 16 MB of zeros deflate to ~16 KB: the first rows of a gigapixel image.
  const idat = zlib.deflateSync(Buffer.alloc(16 * 1024 * 1024));
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), chunk('IHDR', ihdr), chunk('IDAT', idat), chunk('IEND', Buffer.alloc(0))]);
}

describe('hostile inputs → 4xx, and the server keeps serving', () => {
  let jpeg: Buffer;
  let callsBefore = 0;
  before(async () => {
    jpeg = await sharp(goldens()[0]!.png).jpeg({ quality: 90 }).toBuffer();
    callsBefore = s.backend.calls;
  });

  const undecodable = /image/;
  const hostile: Array<[string, () => Promise<unknown> | unknown, number, string, RegExp]> = [
    ['empty string', () => '', 400, 'E_IMAGE_UNDECODABLE', /image is empty/],
    ['whitespace only', () => ' \r\n ', 400, 'E_IMAGE_UNDECODABLE', /image is empty/],
    ['invalid base64', () => '!!!not*base64', 400, 'E_IMAGE_UNDECODABLE', /not valid base64 \(character "!" at offset 0\)/],
    ['base64 with a dangling character', () => 'QUJDR', 400, 'E_IMAGE_UNDECODABLE', /not valid base64/],
    ['text bytes', () => Buffer.from('hello, this is not an image\n').toString('base64'), 400, 'E_IMAGE_UNDECODABLE', undecodable],
    ['truncated PNG', () => goldens()[0]!.png.subarray(0, goldens()[0]!.png.length >> 1).toString('base64'), 400, 'E_IMAGE_UNDECODABLE', undecodable],
    ['truncated JPEG', () => jpeg.subarray(0, jpeg.length >> 1).toString('base64'), 400, 'E_IMAGE_UNDECODABLE', undecodable],
    ['PNG header only', () => goldens()[0]!.png.subarray(0, 8).toString('base64'), 400, 'E_IMAGE_UNDECODABLE', undecodable],
    ['a data: URL without ;base64', () => 'data:image/png,abcd', 400, 'E_IMAGE_UNDECODABLE', /without ';base64'/],
    ['8193-px side', async () => (await sharp({ create: { width: 8193, height: 2, channels: 3, background: '#000' } }).png().toBuffer()).toString('base64'), 400, '', /8193/],
    ['decompression bomb (PNG header claims 30000×30000)', () => pngBomb(30000, 30000).toString('base64'), 400, '', /30000|pixel limit|too large/i],
    ['33 MB of bytes', () => IMAGE_33MB, 400, 'E_IMAGE_TOO_LARGE', /image is too large: 34603008 bytes after base64 decoding; the limit is 33554432 bytes \(32 MiB\)/],
  ];
  for (const [name, make, status, code, re] of hostile) {
    test(`${name} → ${status}`, async () => {
      const image = await make();
      const r = await postJson(s.url, image instanceof Uint8Array ? image : { image });
      assert.equal(r.status, status, r.text.slice(0, 300));
      if (code) assert.equal(r.json.code, code);
      else assert.ok(['E_IMAGE_TOO_LARGE', 'E_IMAGE_UNDECODABLE'].includes(r.json.code), r.json.code);
      assert.match(r.json.detail, re);
      assert.equal(s.backend.calls, callsBefore, 'no hostile input reaches the engine');
    });
  }

  test('zero-byte raw body and a zero-byte multipart file → 400', async () => {
    const raw = await fetch(`${s.url}/predict`, { method: 'POST', headers: { 'content-type': 'image/png' }, body: new Uint8Array(0) });
    assert.equal(raw.status, 400);
    assert.match(((await raw.json()) as any).detail, /image is empty \(0 bytes\)/);
    const fd = new FormData();
    fd.append('image', new Blob([]), 'empty.png');
    const mp = await fetch(`${s.url}/predict`, { method: 'POST', body: fd });
    assert.equal(mp.status, 400);
    assert.match(((await mp.json()) as any).detail, /empty \(0 bytes\)/);
  });

  test('a raw or multipart image over 32 MB → 400 E_IMAGE_TOO_LARGE', async () => {
    const big = Buffer.alloc(32 * 1024 * 1024 + 1, 1);
    const raw = await fetch(`${s.url}/predict`, { method: 'POST', headers: { 'content-type': 'image/jpeg' }, body: big });
    const rb: any = await raw.json();
    assert.equal(raw.status, 400, JSON.stringify(rb));
    assert.equal(rb.code, 'E_IMAGE_TOO_LARGE');
    const fd = new FormData();
    fd.append('image', new Blob([big]), 'big.jpg');
    const mp = await fetch(`${s.url}/predict`, { method: 'POST', body: fd });
    const mb: any = await mp.json();
    assert.equal(mp.status, 400, JSON.stringify(mb));
    assert.equal(mb.code, 'E_IMAGE_TOO_LARGE');
  });

  test('a JSON body over the body limit → 413 E_BODY_TOO_LARGE', async () => {
    const r = await postJson(s.url, OVER_BODY_LIMIT);
    assertError(r, 413, 'E_BODY_TOO_LARGE', /exceeds the \d+-byte limit/);
  });

  test('after all of that the server still serves a valid request', async () => {
    const h = await fetch(`${s.url}/health`);
    assert.equal(((await h.json()) as any).status, 'ok');
    const r = await postJson(s.url, { image: png });
    assert.equal(r.status, 200);
    assert.equal(r.json.num_detections, goldens()[0]!.detections['0.5']!.length);
    assert.equal(s.backend.calls, callsBefore + 1);
  });
});
