// POST /predict with the decode in the sidecar (SERVING.md, "Where images are decoded"), against the real test
// sidecar (engine test-echo: logits = pixel_values + 1, boxes = the next values × 0.5). Each file goes once to a
// server whose sidecar decodes it and once to one started with RFDETR_SIDECAR_DECODE=off (sharp decodes it in
// the server): the raw outputs, i.e. the model input, must be the same bit for bit, and the metric says who
// decoded it. The echo carries pixel_values' first 28 500 values: the first ~49 rows of the red plane.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { packageRoot } from '../../src/config/paths.ts';
import { createServer, type RfdetrServer } from '../../src/http/server.ts';
import { createJsonLogger } from '../../src/http/log.ts';
import { createBackend } from '../../src/sidecar/index.ts';
import { goldens, u8 } from './helpers.ts';

const testBinary = path.join(packageRoot, 'sidecar', 'build', 'rfdetr-sidecar-test');

interface Served {
  url: string;
  srv: RfdetrServer;
  backend: ReturnType<typeof createBackend>;
}

/** A server over a real test-echo sidecar; `decode: 'off'` starts it with RFDETR_SIDECAR_DECODE=off. */
async function serve(dir: string, decode: 'on' | 'off'): Promise<Served> {
  const before = process.env.RFDETR_SIDECAR_DECODE;
  if (decode === 'off') process.env.RFDETR_SIDECAR_DECODE = 'off';
  else delete process.env.RFDETR_SIDECAR_DECODE;
  try {
    const weightsDir = path.join(dir, decode);
    mkdirSync(weightsDir);
    const backend = createBackend({ engine: 'test-echo', weightsDir, command: { file: testBinary } });
    const srv = createServer({ backend, logger: createJsonLogger('error', () => {}), defaultMetrics: false });
    const { url } = await srv.listen('127.0.0.1', 0);
    // The connection reads the variable when it is made, at READY.
    await backend.ready(60_000);
    return { url, srv, backend };
  } finally {
    if (before === undefined) delete process.env.RFDETR_SIDECAR_DECODE;
    else process.env.RFDETR_SIDECAR_DECODE = before;
  }
}

let dir = '';
let on: Served;
let off: Served;

before(async () => {
  assert.ok(existsSync(testBinary), `${testBinary} is not built: run npm install`);
  dir = mkdtempSync(path.join(os.tmpdir(), 'rfdetr-sidecar-decode-'));
  on = await serve(dir, 'on');
  off = await serve(dir, 'off');
  // decodes() answers false until the sidecar said what it decodes: ask, and wait for the answer.
  on.backend.decodes('png');
  await on.backend.decodersKnown();
  await off.backend.decodersKnown();
  assert.equal(on.backend.decodes('png'), true, 'the test sidecar decodes PNG');
  assert.equal(on.backend.decodes('jpeg'), true, 'the test sidecar decodes JPEG');
  assert.equal(off.backend.decodes('png'), false, 'RFDETR_SIDECAR_DECODE=off: the server decodes');
});

after(async () => {
  for (const s of [on, off]) {
    if (!s) continue;
    await s.srv.drain(5_000);
    s.backend.destroy();
  }
  if (dir) rmSync(dir, { recursive: true, force: true });
});

type By = 'server' | 'sidecar' | 'server_after_decline';

/** rfdetr_images_decoded_total by `by`, from /metrics. */
async function decodedBy(url: string): Promise<Record<By, number>> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const out: Record<By, number> = { server: 0, sidecar: 0, server_after_decline: 0 };
  for (const m of text.matchAll(/^rfdetr_images_decoded_total\{by="(\w+)"\} (\d+)$/gm)) out[m[1] as By] = Number(m[2]);
  return out;
}

interface Answer {
  status: number;
  body: any;
  serverTiming: string;
  /** Which rfdetr_images_decoded_total series this request moved, and by how much. */
  by: Partial<Record<By, number>>;
}

async function predict(s: Served, bytes: Buffer, type: string, query = 'return_raw=true'): Promise<Answer> {
  const was = await decodedBy(s.url);
  const res = await fetch(`${s.url}/predict?${query}`, { method: 'POST', headers: { 'content-type': type }, body: u8(bytes) });
  const body = await res.json();
  const now = await decodedBy(s.url);
  const by: Partial<Record<By, number>> = {};
  for (const k of Object.keys(now) as By[]) if (now[k] !== was[k]) by[k] = now[k] - was[k];
  return { status: res.status, body, serverTiming: res.headers.get('server-timing') ?? '', by };
}

/** The model input the echo gave back (logits − 1 and boxes × 2 are pixel_values), as raw numbers. */
function echoed(a: Answer): { logits: number[][]; pred_boxes: number[][] } {
  assert.equal(a.status, 200, JSON.stringify(a.body));
  return a.body.raw;
}

const png = () => goldens()[0]!.png; // 640×480 RGB
const odd = () => goldens()[1]!.png; // 333×517: partial JPEG blocks on both edges

async function rgbaPng(): Promise<Buffer> {
  const { data, info } = await sharp(png()).raw().toBuffer({ resolveWithObject: true });
  const rgba = Buffer.alloc(info.width * info.height * 4);
  for (let i = 0; i < info.width * info.height; i++) {
    rgba.set(data.subarray(3 * i, 3 * i + 3), 4 * i);
    rgba[4 * i + 3] = (i * 7) & 255; // alpha that varies, dropped by both decodes
  }
  return sharp(rgba, { raw: { width: info.width, height: info.height, channels: 4 } }).png().toBuffer();
}

/** `jpeg` with `extra` inserted right before its start-of-scan marker (libjpeg: "extraneous bytes", a warning). */
function beforeSos(jpeg: Buffer, extra: Buffer): Buffer {
  let i = 2;
  while (!(jpeg[i] === 0xff && jpeg[i + 1] === 0xda)) {
    assert.equal(jpeg[i], 0xff, `a marker at ${i}`);
    i += 2 + jpeg.readUInt16BE(i + 2);
  }
  return Buffer.concat([jpeg.subarray(0, i), extra, jpeg.subarray(i)]);
}

test('sidecar decode: PNG (RGB, palette, RGBA) and JPEG (q90 4:2:0, grey) give the model the same input as the server decode, and go by=sidecar', async () => {
  const cases: Array<[string, Buffer, string]> = [
    ['640x480 RGB PNG', png(), 'image/png'],
    ['palette PNG', await sharp(png()).png({ palette: true }).toBuffer(), 'image/png'],
    ['RGBA PNG', await rgbaPng(), 'image/png'],
    ['q90 4:2:0 JPEG 333x517', await sharp(odd()).jpeg({ quality: 90, chromaSubsampling: '4:2:0' }).toBuffer(), 'image/jpeg'],
    ['grey JPEG', await sharp(png()).greyscale().jpeg({ quality: 90 }).toBuffer(), 'image/jpeg'],
  ];
  for (const [what, bytes, type] of cases) {
    const viaSidecar = await predict(on, bytes, type);
    const viaServer = await predict(off, bytes, type);
    assert.deepEqual(viaSidecar.by, { sidecar: 1 }, `${what}: decoded by the sidecar`);
    assert.deepEqual(viaServer.by, { server: 1 }, `${what}: decoded by the server with RFDETR_SIDECAR_DECODE=off`);
    const a = echoed(viaSidecar);
    const b = echoed(viaServer);
    // Bit for bit: JSON numbers are the f32 values widened to f64, exactly.
    assert.ok(a.logits.every((row, q) => row.every((v, c) => Object.is(v, b.logits[q]![c]))), `${what}: the same pixel_values (logits − 1)`);
    assert.ok(a.pred_boxes.every((row, q) => row.every((v, c) => Object.is(v, b.pred_boxes[q]![c]))), `${what}: the same pixel_values (boxes × 2)`);
    assert.deepEqual(viaSidecar.body.detections, viaServer.body.detections, `${what}: the same detections`);
    assert.deepEqual(viaSidecar.body.image_size, viaServer.body.image_size);
    // The sidecar's decode is a stage of its own, inside the sidecar's share, and part of timing_ms.decode.
    const dur = /(?:^|, )sidecar-decode;dur=([\d.]+)/.exec(viaSidecar.serverTiming);
    assert.ok(dur && Number(dur[1]) > 0, `${what}: Server-Timing has sidecar-decode: ${viaSidecar.serverTiming}`);
    assert.ok(viaSidecar.body.timing_ms.decode + 0.001 >= Number(dur[1]), `${what}: timing_ms.decode ${viaSidecar.body.timing_ms.decode} includes the sidecar's ${dur[1]}`);
    assert.match(viaSidecar.serverTiming, /sidecar-decode;dur=[\d.]+, preprocess;dur=/, 'before the resize');
    assert.doesNotMatch(viaServer.serverTiming, /sidecar-decode/, `${what}: no sidecar decode when the server decoded it`);
    const stages = [...viaSidecar.serverTiming.matchAll(/(?:^|, )([\w-]+);dur=([\d.]+)/g)].map((m) => [m[1]!, Number(m[2])] as const);
    const total = stages.find(([n]) => n === 'total')![1];
    const sum = stages.filter(([n]) => !['total', 'gc', 'loop-delay'].includes(n)).reduce((x, [, ms]) => x + ms, 0);
    assert.ok(Math.abs(sum - total) < 0.001 * stages.length, `${what}: the stages add up to the total (${sum} vs ${total})`);
  }
});

test('sidecar decode: an interlaced PNG, a CMYK JPEG and a return_image request are decoded by the server', async () => {
  const interlaced = await sharp(png()).png({ progressive: true }).toBuffer();
  const cmyk = await sharp(png()).toColourspace('cmyk').jpeg().toBuffer();
  for (const [what, bytes, type] of [['interlaced PNG', interlaced, 'image/png'], ['CMYK JPEG', cmyk, 'image/jpeg']] as const) {
    const a = await predict(on, bytes, type);
    assert.equal(a.status, 200, JSON.stringify(a.body));
    assert.deepEqual(a.by, { server: 1 }, what);
    assert.deepEqual(echoed(a), echoed(await predict(off, bytes, type)), `${what}: the same input either way`);
  }
  const drawn = await predict(on, png(), 'image/png', 'return_image=png');
  assert.equal(drawn.status, 200, JSON.stringify(drawn.body));
  assert.deepEqual(drawn.by, { server: 1 }, 'return_image: the drawing needs the pixels here');
  assert.ok(drawn.body.annotated_image.base64.length > 0);
});

test('sidecar decode: a JPEG the sidecar declines but sharp reads (stray bytes before SOS) is decoded here after the decline: 200, same detections', async () => {
  const jpeg = await sharp(png()).jpeg({ quality: 90 }).toBuffer();
  const stray = beforeSos(jpeg, Buffer.from([0x12, 0x34, 0x56]));
  const a = await predict(on, stray, 'image/jpeg');
  assert.equal(a.status, 200, JSON.stringify(a.body));
  assert.deepEqual(a.by, { server_after_decline: 1 }, 'declined by the sidecar, then decoded by the server');
  const b = await predict(off, stray, 'image/jpeg');
  assert.deepEqual(a.body.detections, b.body.detections);
  assert.deepEqual(echoed(a), echoed(b), 'the same model input as the server decode');
  assert.deepEqual(echoed(b), echoed(await predict(off, jpeg, 'image/jpeg')), 'the stray bytes change nothing in sharp\'s decode');
});

test('sidecar decode: a truncated PNG is still a 400 E_IMAGE_UNDECODABLE', async () => {
  const cut = png().subarray(0, Math.floor(png().length / 2));
  const a = await predict(on, cut, 'image/png');
  assert.equal(a.status, 400, JSON.stringify(a.body));
  assert.equal(a.body.code, 'E_IMAGE_UNDECODABLE');
  const b = await predict(off, cut, 'image/png');
  assert.equal(b.status, 400);
  assert.equal(b.body.code, 'E_IMAGE_UNDECODABLE');
});
