// /predict gives a decoded image's pooled pixel buffer back (RgbImage.release, src/image/pixel-pool.ts) once
// per image, after the forward has used the pixels, whether the request succeeded or failed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { decodeImage, type DecodeOptions } from '../../src/image/decode.ts';
import { goldens, postJson, start } from './helpers.ts';

test('predict: the pixels\' release runs once per request, after the forward, on success and on a failed forward', async () => {
  const events: string[] = [];
  const decode = async (bytes: Uint8Array, o: DecodeOptions) => {
    const img = await decodeImage(bytes, o);
    return { ...img, release: () => events.push('release') };
  };
  const s = await start({ decode });
  const respond = s.backend.respond;
  s.backend.respond = (input) => {
    events.push('forward');
    return respond(input);
  };
  try {
    const ok = await postJson(s.url, { image: goldens()[0]!.png.toString('base64') });
    assert.equal(ok.status, 200, ok.text);
    assert.deepEqual(events, ['forward', 'release']);
    events.length = 0;
    s.backend.fail = new Error('scripted failure');
    const failed = await postJson(s.url, { image: goldens()[0]!.png.toString('base64') });
    assert.notEqual(failed.status, 200);
    assert.deepEqual(events, ['release'], 'a failed forward must give the pixels back too');
  } finally {
    await s.stop();
  }
});
