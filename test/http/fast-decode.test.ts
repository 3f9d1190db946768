// fast_decode: opt-in; a large JPEG reaches the engine as a model-sized DCT-scaled decode while the answer
// (image_size, boxes) stays in the stored image's pixels; the default, PNGs, small JPEGs and return_image
// send the exact decode.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import sharp from 'sharp';
import { decodeImage } from '../../src/image/decode.ts';
import { fixedResponder, goldens, postJson, start, type Started } from './helpers.ts';

let s: Started;
let big: Buffer;
before(async () => {
  s = await start();
  big = await sharp(goldens()[0]!.png).resize(2400, 1800).jpeg({ quality: 90 }).toBuffer();
});
after(() => s.stop());

const sent = () => {
  const i = s.backend.lastInput;
  assert.ok(i && 'image' in i, 'the backend got an image');
  return i.image;
};

test('fast_decode: a 2400×1800 JPEG goes to the engine as 560×560, the answer stays in 2400×1800 pixels', async () => {
  const exact = await postJson(s.url, { image: big.toString('base64'), threshold: 0 });
  assert.equal(exact.status, 200, exact.text);
  assert.deepEqual([sent().width, sent().height], [2400, 1800], 'the default is the exact decode');
  const fast = await postJson(s.url, { image: big.toString('base64'), threshold: 0, fast_decode: true });
  assert.equal(fast.status, 200, fast.text);
  assert.deepEqual([sent().width, sent().height], [560, 560]);
  assert.equal(sent().data.length, 560 * 560 * 3);
  assert.deepEqual(fast.json.image_size, { width: 2400, height: 1800 });
  // The backend answers the same outputs for any input: the boxes must be the exact path's, in stored pixels.
  assert.deepEqual(fast.json.detections, exact.json.detections);
  assert.ok(fast.json.detections.some((d: { box: number[] }) => d.box[2]! > 560), 'boxes are in 2400×1800 pixels');
  assert.equal(fixedResponder().logits.length, 300 * 91);
});

test('fast_decode: the scaled pixels stay close to the exact decode resized; PNG, a small JPEG and return_image decode exactly', async () => {
  const scaled = await decodeImage(big, { fastDecode: { size: 560 } });
  assert.deepEqual(scaled.source, { width: 2400, height: 1800 });
  const exact = await decodeImage(big);
  const ref = await sharp(Buffer.from(exact.data), { raw: { width: 2400, height: 1800, channels: 3 } }).resize(560, 560, { fit: 'fill', kernel: 'linear' }).raw().toBuffer();
  let se = 0;
  for (let i = 0; i < ref.length; i++) se += (ref[i]! - scaled.data[i]!) ** 2;
  const psnr = 10 * Math.log10((255 * 255) / (se / ref.length));
  assert.ok(psnr > 35, `PSNR ${psnr.toFixed(1)} dB against the exact decode resized the same way`);

  const png = goldens()[0]!.png;
  const viaPng = await decodeImage(png, { fastDecode: { size: 560 } });
  assert.equal(viaPng.source, undefined);
  assert.deepEqual(viaPng, await decodeImage(png));
  const small = await sharp(png).resize(2000, 1600).jpeg().toBuffer();
  const viaSmall = await decodeImage(small, { fastDecode: { size: 560 } });
  assert.deepEqual([viaSmall.width, viaSmall.height, viaSmall.source], [2000, 1600, undefined], 'under 3× the input side (no DCT scale): exact');

  const drawn = await postJson(s.url, { image: big.toString('base64'), fast_decode: true, return_image: 'jpeg' });
  assert.equal(drawn.status, 200, drawn.text);
  assert.deepEqual([sent().width, sent().height], [2400, 1800], 'return_image draws on the stored pixels: exact decode');
  const bad = await postJson(s.url, { image: big.toString('base64'), fast_decode: 'yes' });
  assert.equal(bad.status, 422);
  assert.match(bad.json.detail, /Expected a boolean .* for fast_decode but received "yes"/);
});

test('fast_decode: as a query parameter of a raw body and as a multipart field', async () => {
  const raw = await fetch(`${s.url}/predict?fast_decode=true`, { method: 'POST', headers: { 'content-type': 'image/jpeg' }, body: new Uint8Array(big) });
  assert.equal(raw.status, 200);
  assert.deepEqual([sent().width, sent().height], [560, 560]);
  const form = new FormData();
  form.append('image', new Blob([new Uint8Array(big)], { type: 'image/jpeg' }), 'big.jpg');
  form.append('fast_decode', '1');
  const mp = await fetch(`${s.url}/predict`, { method: 'POST', body: form });
  assert.equal(mp.status, 200);
  assert.deepEqual([sent().width, sent().height], [560, 560]);
});
