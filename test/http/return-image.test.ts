// return_image: the annotated picture in the response, drawn by detect --save's code (src/draw/annotate.ts),
// as PNG or JPEG, in every body form and per image of a batch; any other value is a 422.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import sharp from 'sharp';
import { annotate } from '../../src/draw/annotate.ts';
import { decodeImage } from '../../src/image/decode.ts';
import { goldens, postJson, start, u8, type Started } from './helpers.ts';

let s: Started;
let png: string;
before(async () => {
  s = await start();
  png = goldens()[0]!.png.toString('base64');
});
after(() => s.stop());

test('return_image "png": the picture detect --save draws for the same detections', async () => {
  const r = await postJson(s.url, { image: png, return_image: 'png' });
  assert.equal(r.status, 200, r.text.slice(0, 300));
  const a = r.json.annotated_image;
  assert.equal(a.format, 'png');
  assert.equal(a.media_type, 'image/png');
  const got = Buffer.from(a.base64, 'base64');
  const want = await annotate(await decodeImage(goldens()[0]!.png), r.json.detections, 'png');
  assert.ok(got.equals(want), 'byte-identical to annotate() of the decoded image and the returned detections');
  const plain = await postJson(s.url, { image: png });
  assert.equal(plain.json.annotated_image, undefined, 'absent unless asked for');
  assert.ok(!got.equals(goldens()[0]!.png), 'something was drawn');
});

test('return_image "jpeg" in multipart, query-string and batch forms', async () => {
  const g = goldens()[0]!;
  const fd = new FormData();
  fd.append('image', new Blob([u8(g.png)]), 'x.png');
  fd.append('return_image', 'jpeg');
  const mp: any = await (await fetch(`${s.url}/predict`, { method: 'POST', body: fd })).json();
  const meta = await sharp(Buffer.from(mp.annotated_image.base64, 'base64')).metadata();
  assert.equal(meta.format, 'jpeg');
  assert.deepEqual([meta.width, meta.height], [g.width, g.height]);
  const raw: any = await (await fetch(`${s.url}/predict?return_image=png`, { method: 'POST', headers: { 'content-type': 'image/png' }, body: u8(g.png) })).json();
  assert.equal(raw.annotated_image.media_type, 'image/png');
  const b = await postJson(s.url, { images: [png, goldens()[1]!.png.toString('base64')], return_image: 'jpeg' });
  assert.equal(b.status, 200);
  const sizes = await Promise.all(b.json.results.map(async (x: any) => (await sharp(Buffer.from(x.annotated_image.base64, 'base64')).metadata()).width));
  assert.deepEqual(sizes, [g.width, goldens()[1]!.width]);
});

test('any other return_image → 422 naming the accepted values', async () => {
  const r = await postJson(s.url, { image: png, return_image: 'gif' });
  assert.equal(r.status, 422);
  assert.equal(r.json.field, 'return_image');
  assert.match(r.json.detail, /Expected "png" or "jpeg" \(default: no picture\) for return_image but received "gif" of type string/);
  const t = await postJson(s.url, { image: png, return_image: true });
  assert.match(t.json.detail, /for return_image but received true of type boolean/);
});
