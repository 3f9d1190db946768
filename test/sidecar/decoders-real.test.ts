// The client against the real test sidecar (engine test-echo: logits = pixel_values + 1) for images it decodes:
// decodes() learns jpeg and png from the decoders reply, a PNG fixture and a sharp-written JPEG sent as files give
// the logits their pixels decoded by the server (decodeImage, sharp) give, and a corrupt file is E_SIDECAR_DECLINED
// with the connection serving on.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { startTestSidecar } from '../helpers/test-sidecar.ts';
import sharp from 'sharp';
import { testFixturesDir } from '../../src/config/paths.ts';
import { SidecarConnection } from '../../src/sidecar/client.ts';
import { decodeImage } from '../../src/image/decode.ts';
import { isRfdetrError, type RfdetrError } from '../../src/errors.ts';

async function startSidecar(t: { after: (fn: () => unknown) => void }): Promise<SidecarConnection> {
  const { socket } = await startTestSidecar(t, 'rfdetr-dec-');
  const conn = await SidecarConnection.connect(socket, { helloTimeoutMs: 10_000 });
  t.after(() => conn.close());
  return conn;
}

test('real sidecar: decodes() is false until its decoders reply names jpeg and png, then true', async (t) => {
  const conn = await startSidecar(t);
  assert.equal(conn.decodes('png'), false, 'nothing is known before the reply');
  await conn.decodersKnown();
  assert.equal(conn.decodes('png'), true);
  assert.equal(conn.decodes('jpeg'), true);
});

test('real sidecar: a PNG and a JPEG sent as files give the logits of the same images decoded by sharp; a corrupt one is E_SIDECAR_DECLINED', async (t) => {
  const conn = await startSidecar(t);
  await conn.decodersKnown();
  const png = readFileSync(path.join(testFixturesDir, 'rfdetr-synth', 'case-1', 'input.png'));
  const jpeg = await sharp(png).jpeg({ quality: 85 }).toBuffer();
  for (const [format, file] of [['png', png], ['jpeg', jpeg]] as const) {
    const image = await decodeImage(file);
    const asImage = await conn.infer({ image });
    const asFile = await conn.infer({ encoded: { format, width: image.width, height: image.height, bytes: file } });
    assert.equal(asImage.decodeMs, undefined);
    assert.ok(Number.isFinite(asFile.decodeMs), `${format}: the reply to a file carries decode_ms, got ${asFile.decodeMs}`);
    assert.ok(Buffer.from(asFile.outputs.logits!.buffer).equals(Buffer.from(asImage.outputs.logits!.buffer)), `${format}: the sidecar's decode gives other logits than sharp's`);
    assert.ok(Buffer.from(asFile.outputs.pred_boxes!.buffer).equals(Buffer.from(asImage.outputs.pred_boxes!.buffer)), format);
  }
  const e = await conn.infer({ encoded: { format: 'png', width: 640, height: 480, bytes: png.subarray(0, png.length >> 1) } })
    .then(() => assert.fail('a truncated PNG must be declined'), (err: RfdetrError) => err);
  assert.ok(isRfdetrError(e, 'E_SIDECAR_DECLINED'), String(e));
  assert.match(e.message, /E_DECODE: .*png/);
  assert.equal(conn.closed, false);
  await conn.ping(5_000);
});
