// The server's side of a file sent to the sidecar to decode, with a scripted backend that says it decodes and
// decodes with sharp (so its answers are the server path's): the pixels are reserved in the memory budget as if
// decoded here, a decline is decoded here and sent again as pixels, timing_ms.decode carries the sidecar's
// decode time. The real sidecar's decode is test/http/sidecar-decode.test.ts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RfdetrError } from '../../src/errors.ts';
import { decodeImage } from '../../src/image/decode.ts';
import type { InferInput, InferOptions, InferResult } from '../../src/sidecar/backend.ts';
import { FakeBackend, goldens, start, u8, waitFor, type Started } from './helpers.ts';

/** Says it decodes JPEG and PNG; an `encoded` input is decoded with sharp, or declined when `decline` is set. */
class DecodingBackend extends FakeBackend {
  decline: string | undefined;
  inputs: string[] = [];
  override decodes(_format: 'jpeg' | 'png'): boolean {
    return true;
  }
  override async infer(input: InferInput, opts: InferOptions = {}): Promise<InferResult> {
    this.inputs.push(Object.keys(input)[0]!);
    if (!('encoded' in input)) return super.infer(input, opts);
    if (this.decline) throw new RfdetrError('E_SIDECAR_DECLINED', this.decline);
    const r = await super.infer({ image: await decodeImage(input.encoded.bytes) }, opts);
    return { ...r, decodeMs: 7 };
  }
}

const post = (s: Started, query = '') => fetch(`${s.url}/predict${query}`, { method: 'POST', headers: { 'content-type': 'image/png' }, body: u8(goldens()[0]!.png) });

async function decodedBy(s: Started): Promise<string> {
  const text = await (await fetch(`${s.url}/metrics`)).text();
  return [...text.matchAll(/^rfdetr_images_decoded_total\{by="(\w+)"\} (\d+)$/gm)].filter((m) => m[2] !== '0').map((m) => `${m[1]}=${m[2]}`).join(' ');
}

test('sidecar decode (scripted): the file is sent as it is, its pixels reserved as a decode here would; timing_ms.decode has the sidecar\'s decode', async () => {
  const s = await start({ backend: new DecodingBackend() });
  try {
    const b = s.backend as DecodingBackend;
    const release = b.block();
    const answer = post(s);
    await waitFor(() => b.inFlight === 1, 'the forward to start');
    assert.equal(s.srv.admission.memory.work.running, 640 * 480 * 3, 'the 640×480 image\'s pixels are reserved while it is in the sidecar');
    release();
    const res = await answer;
    assert.equal(res.status, 200);
    const body = (await res.json()) as { timing_ms: { decode: number } };
    assert.ok(body.timing_ms.decode >= 7, `timing_ms.decode ${body.timing_ms.decode} includes the sidecar's 7 ms`);
    assert.match(res.headers.get('server-timing')!, /sidecar-decode;dur=7, preprocess;dur=/);
    assert.deepEqual(b.inputs, ['encoded']);
    assert.equal(await decodedBy(s), 'sidecar=1');
    assert.equal(s.srv.admission.memory.work.running, 0, 'released once answered');
  } finally {
    await s.stop();
  }
});

test('sidecar decode (scripted): a declined file is decoded here and sent as pixels: 200, by=server_after_decline', async () => {
  const b = new DecodingBackend();
  b.decline = 'libjpeg warned: extraneous bytes';
  const s = await start({ backend: b });
  try {
    const res = await post(s);
    assert.equal(res.status, 200, await res.clone().text());
    assert.deepEqual(b.inputs, ['encoded', 'image'], 'sent as the file, then as the decoded pixels');
    assert.equal(await decodedBy(s), 'server_after_decline=1');
    assert.equal(s.srv.admission.memory.work.running, 0);
    // return_image and fast_decode never send the file.
    assert.equal((await post(s, '?return_image=png')).status, 200);
    assert.equal((await post(s, '?fast_decode=true')).status, 200);
    assert.deepEqual(b.inputs.slice(2), ['image', 'image']);
    assert.equal(await decodedBy(s), 'server=2 server_after_decline=1');
  } finally {
    await s.stop();
  }
});
