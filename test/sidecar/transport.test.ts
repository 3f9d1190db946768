// The transport's one decision (src/sidecar/transport.ts prepareFrame) over scripted capabilities: which file
// goes to the sidecar as it is and which is decoded here, what is reserved from the budget and when the slot
// and the file's bytes are given back, a decline's retry, pixels and a tensor as they are.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import sharp from 'sharp';
import { testFixturesDir } from '../../src/config/paths.ts';
import { RfdetrError, isRfdetrError } from '../../src/errors.ts';
import type { InferInput } from '../../src/sidecar/backend.ts';
import { prepareFrame, type TransportBudget, type TransportCaps } from '../../src/sidecar/transport.ts';

const png = fs.readFileSync(path.join(testFixturesDir, 'rfdetr-synth', 'case-1', 'input.png'));
const W = 640;
const H = 480;

/** Capabilities that decode `formats` and lend no slot, counting what they are asked. */
function caps(formats: string[] = ['png', 'jpeg']): TransportCaps & { targets: number } {
  return {
    targets: 0,
    decodes: (f) => formats.includes(f),
    frameTarget() {
      this.targets++;
      return undefined;
    },
  };
}

/** A budget that records the order of its hooks. */
function budget(extra: TransportBudget = {}): TransportBudget & { log: string[] } {
  const log: string[] = [];
  return {
    log,
    slot: async () => {
      log.push('slot');
      return () => log.push('slot released');
    },
    reserve: async (n, size) => void log.push(`reserve ${n} ${size.width}x${size.height}`),
    fileDone: () => log.push('file done'),
    ...extra,
  };
}

const formOf = (i: InferInput) => Object.keys(i)[0];

test('transport: a plain PNG the sidecar decodes is sent as the file; its pixels are reserved; the file is held until the answer', async () => {
  const b = budget();
  const p = await prepareFrame(caps(), { file: png }, b);
  assert.equal(p.by, 'sidecar');
  assert.equal(formOf(p.input), 'encoded');
  assert.equal(p.image, undefined);
  assert.deepEqual(b.log, ['slot', `reserve ${W * H * 3} ${W}x${H}`, 'slot released']);
  const r = await p.send(async (input) => formOf(input));
  assert.equal(r, 'encoded');
  assert.deepEqual(b.log.slice(3), ['file done'], 'the file is given up once the sidecar answered');
});

test('transport: decoded here when the pixels are needed, with a scaled decode, for a format the sidecar does not decode, or with no sidecar decode at all', async () => {
  for (const [why, c, extra] of [
    ['needPixels', caps(), { needPixels: true }],
    ['fastDecode', caps(), { fastDecode: { size: 560 } }],
    ['jpeg only', caps(['jpeg']), {}],
    ['no caps', undefined, {}],
  ] as const) {
    const b = budget(extra);
    const p = await prepareFrame(c, { file: png }, b);
    assert.equal(p.by, 'server', why);
    assert.equal(formOf(p.input), 'image', why);
    assert.equal(p.image?.width, W, why);
    assert.deepEqual(b.log, ['slot', `reserve ${W * H * 3} ${W}x${H}`, 'slot released', 'file done'], why);
    p.release();
  }
  // Decoding here offers the backend's slots for a large JPEG, unless the pixels are needed here.
  const lend = caps([]);
  await prepareFrame(lend, { file: await sharp({ create: { width: 2000, height: 1500, channels: 3, background: '#123' } }).jpeg().toBuffer() });
  assert.equal(lend.targets, 1, 'a large JPEG decoded here asks for a slot');
  const keep = caps([]);
  await prepareFrame(keep, { file: await sharp({ create: { width: 2000, height: 1500, channels: 3, background: '#123' } }).jpeg().toBuffer() }, { needPixels: true });
  assert.equal(keep.targets, 0, 'pixels needed here: no slot asked');
});

test('transport: a declined file is decoded here (no second slot) and sent again as pixels', async () => {
  const b = budget();
  const p = await prepareFrame(caps(), { file: png }, b);
  const sent: string[] = [];
  let declined: number | undefined;
  const r = await p.send(async (input) => {
    sent.push(formOf(input)!);
    if ('encoded' in input) throw new RfdetrError('E_SIDECAR_DECLINED', 'declined (scripted)');
    return 'ok';
  }, (ms) => (declined = ms));
  assert.equal(r, 'ok');
  assert.deepEqual(sent, ['encoded', 'image']);
  assert.equal(p.by, 'server_after_decline');
  assert.equal(p.image?.width, W);
  assert.ok(declined !== undefined && declined >= 0, 'onDecline was told the decode time');
  assert.deepEqual(b.log, ['slot', `reserve ${W * H * 3} ${W}x${H}`, 'slot released', 'file done'], 'no second slot or reservation');
  // Any other failure is the caller's, as it is.
  const q = await prepareFrame(caps(), { file: png });
  await assert.rejects(q.send(async () => {
    throw new RfdetrError('E_INFERENCE', 'boom');
  }), (e: unknown) => isRfdetrError(e, 'E_INFERENCE'));
  assert.equal(q.by, 'sidecar');
});

test('transport: pixels and a tensor go as they are (pixels reserved from their sides); undecodable bytes are E_IMAGE_UNDECODABLE', async () => {
  const b = budget();
  const pixels = { data: new Uint8Array(4 * 2 * 3), width: 4, height: 2 };
  const p = await prepareFrame(caps(), { pixels }, b);
  assert.equal(p.by, null);
  assert.deepEqual(p.input, { image: pixels });
  assert.deepEqual(b.log, ['reserve 24 4x2'], 'no slot for pixels');
  const tensor = new Float32Array(3 * 4 * 4);
  const t = await prepareFrame(caps(), { tensor });
  assert.deepEqual(t.input, { pixelValues: tensor });
  const bad = budget();
  await assert.rejects(prepareFrame(caps(), { file: Buffer.from('not an image at all') }, bad), (e: unknown) => isRfdetrError(e, 'E_IMAGE_UNDECODABLE'));
  assert.deepEqual(bad.log, ['slot', 'slot released', 'file done'], 'the slot and the file are given back on failure');
});
