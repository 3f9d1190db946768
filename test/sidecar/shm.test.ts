// Frames over shared memory against the real sidecar (test build, engine test-echo): the same logits as
// through the socket, the sidecar's checks on a reference, and no slot file or directory left behind.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { SidecarConnection, shmRange } from '../../src/sidecar/client.ts';
import { ShmSlots, sweepStaleLinkDirs } from '../../src/sidecar/shm-slots.ts';
import { execa as run } from 'execa';
import { mkdirSync, symlinkSync } from 'node:fs';
import { FrameReader, decodePayload, encodeFrame, type WireMessage } from '../../src/protocol/codec.ts';
import { waitFor } from '../helpers/wait-for.ts';
import { startTestSidecar } from '../helpers/test-sidecar.ts';
import sharp from 'sharp';
import { decodeImage } from '../../src/image/decode.ts';
import { PIXEL_THREAD_MIN_BYTES } from '../../src/image/pixel-pool.ts';
import { isRfdetrError } from '../../src/errors.ts';

const startSidecar = (t: { after: (fn: () => unknown) => void }) => startTestSidecar(t, 'rfdetr-shm-');

function image(w: number, h: number): { width: number; height: number; data: Uint8Array } {
  const data = new Uint8Array(w * h * 3);
  for (let i = 0; i < data.length; i++) data[i] = (i * 131 + (i >> 7)) & 0xff;
  return { width: w, height: h, data };
}

/** A raw connection: frames written as given, every decoded reply after the hello collected. */
async function openRaw(t: { after: (fn: () => unknown) => void }, socket: string) {
  const sock = net.createConnection(socket);
  t.after(() => sock.destroy());
  const replies: WireMessage[] = [];
  const reader = new FrameReader((p) => {
    const r = decodePayload(p);
    if (r.ok && r.message.kind !== 'hello') replies.push(r.message);
  }, () => sock.destroy());
  sock.on('data', (d: Buffer) => reader.push(d));
  sock.on('error', () => {});
  return {
    send: (m: WireMessage) => sock.write(encodeFrame(m)),
    reply: (id: number) => waitFor(`the reply to request ${id}`, () => replies.find((m) => m.id === id)),
  };
}

test('shm: images through the slots give the same logits as through the socket, and the slot files go', async (t) => {
  const { socket, pid } = await startSidecar(t);
  const shmDir = `/dev/shm/rfdetr-sidecar-${pid}`;
  const conn = await SidecarConnection.connect(socket, { helloTimeoutMs: 10_000 });
  t.after(() => conn.close());
  const img = { image: image(640, 480) };
  const viaSocket = await conn.infer(img); // the first image asks for slots and goes through the socket
  assert.equal(conn.framesViaShm, 0);
  await waitFor('the shm_attach reply', () => conn.shmStatus !== 'attaching' && conn.shmStatus !== 'unknown');
  assert.equal(conn.shmStatus, 'ready');
  const files = readdirSync(existsSync(shmDir) ? shmDir : path.dirname(socket)).filter((f) => f.startsWith('rfdetr-shm-'));
  assert.equal(files.length, 2, `two slot files before the first reference, found ${files.join(', ')}`);
  const [a, b] = await Promise.all([conn.infer(img), conn.infer({ image: image(33, 17) })]);
  assert.equal(conn.framesViaShm, 2);
  assert.deepEqual(Buffer.from(a.outputs.logits!.buffer), Buffer.from(viaSocket.outputs.logits!.buffer), 'shm and socket give different logits');
  assert.equal(b.outputs.logits!.length, viaSocket.outputs.logits!.length);
  // Both slots were taken by the two requests in flight; a third at once falls back to the socket.
  const before = conn.framesViaShm;
  await Promise.all([conn.infer(img), conn.infer(img), conn.infer(img)]);
  assert.equal(conn.framesViaShm - before, 2);
  const left = readdirSync(existsSync(shmDir) ? shmDir : path.dirname(socket)).filter((f) => f.startsWith('rfdetr-shm-'));
  assert.deepEqual(left, [], 'the sidecar unlinks the slot files once they are in use');
});

test('shm: the sidecar refuses references that are not its own slots or do not fit, naming what was wrong', async (t) => {
  const { socket } = await startSidecar(t);
  const ref = { name: 'rfdetr-shm-1-1-0', offset: 0, length: 12, width: 2, height: 2 };
  const c = await openRaw(t, socket);
  c.send({ kind: 'request', id: 1, op: 'infer', image_shm: ref });
  const noSlots = await c.reply(1);
  assert.ok(noSlots.kind === 'error' && noSlots.error.code === 'E_FIELD' && /send shm_attach first/.test(noSlots.error.message), JSON.stringify(noSlots));
  c.send({ kind: 'request', id: 2, op: 'shm_attach' });
  const attached = await c.reply(2);
  assert.ok(attached.kind === 'reply' && attached.shm && attached.shm.paths.length === 2, JSON.stringify(attached));
  const name = path.basename(attached.shm.paths[0]!);
  const cases: [string, typeof ref, RegExp][] = [
    ['a foreign name', { ...ref, name: 'rfdetr-shm-9-9-9' }, /not one of this connection's slots/],
    ['a wrong length', { ...ref, name, length: 11 }, /expected 2\*2\*3 = 12/],
    ['a range past the end', { ...ref, name, offset: attached.shm.slot_bytes - 6 }, /outside slot/],
  ];
  for (const [i, [what, r, re]] of cases.entries()) {
    c.send({ kind: 'request', id: 10 + i, op: 'infer', image_shm: r });
    const m = await c.reply(10 + i);
    assert.ok(m.kind === 'error' && m.error.code === 'E_FIELD' && re.test(m.error.message), `${what}: ${JSON.stringify(m)}`);
  }
  // The refused references did not use the slots: the files stay until the first good one.
  assert.ok(existsSync(attached.shm.paths[0]!));
});

test('shm: the directory and slot files are gone after the sidecar stops with a connection attached', async (t) => {
  const { socket, pid, child } = await startSidecar(t);
  const c = await openRaw(t, socket);
  c.send({ kind: 'request', id: 1, op: 'shm_attach' });
  const attached = await c.reply(1);
  assert.ok(attached.kind === 'reply' && attached.shm);
  const dirs = [...new Set(attached.shm.paths.map((p) => path.dirname(p)))];
  const own = `/dev/shm/rfdetr-sidecar-${pid}`;
  assert.equal(dirs.length, 1);
  assert.ok([own, path.dirname(socket)].includes(dirs[0]!), `slots in ${dirs[0]}: expected the socket's tmpfs directory or ${own}`);
  for (const p of attached.shm.paths) assert.ok(existsSync(p));
  child.kill('SIGTERM');
  await child;
  for (const p of [...attached.shm.paths, own]) assert.equal(existsSync(p), false, `${p} was left behind`);
});

test('shm: a slot write that fails (ENOSPC) hands the frame back for the socket, and larger frames stop trying', async (t) => {
  const slots = await ShmSlots.open(['/dev/full'], 1 << 20); // every write to /dev/full fails with ENOSPC
  t.after(() => slots.close());
  assert.equal(await slots.put(new Uint8Array(3000), 1000, 1), undefined);
  assert.equal(await slots.put(new Uint8Array(6000), 2000, 1), undefined, 'a larger frame is not tried');
  assert.equal(await slots.put(new Uint8Array(2 << 20), 1, 1), undefined, 'a frame over the slot size is not tried');
  // Frames past 1 MiB are written by the pool, not on the event loop: the same fallback.
  const big = await ShmSlots.open(['/dev/full'], 4 << 20);
  t.after(() => big.close());
  assert.equal(await big.put(new Uint8Array(2 << 20), 1 << 20, 2), undefined, 'a pool write that fails');
  assert.equal(await big.put(new Uint8Array(3000), 1000, 1), undefined, 'a synchronous write that fails');
});

test('shm: which image sizes go through the slots (RFDETR_SHM, RFDETR_SHM_MIN_BYTES, RFDETR_SHM_MAX_BYTES)', () => {
  assert.deepEqual(shmRange({}), { min: 1, max: Infinity });
  assert.deepEqual(shmRange({ RFDETR_SHM: 'off' }), { min: Infinity, max: 0 });
  assert.deepEqual(shmRange({ RFDETR_SHM_MIN_BYTES: '4096', RFDETR_SHM_MAX_BYTES: 'Infinity' }), { min: 4096, max: Infinity });
  assert.deepEqual(shmRange({ RFDETR_SHM_MAX_BYTES: 'lots' }), { min: 1, max: Infinity }, 'a value that is not a number keeps the default');
  assert.deepEqual(shmRange({ RFDETR_SHM_MAX_BYTES: String(8 << 20) }), { min: 1, max: 8 << 20 });
});

/** A noisy 2000×1500 JPEG (9 MB of pixels: a large image) and sharp's own decode of it. */
async function bigJpeg(): Promise<{ jpeg: Buffer; rgb: Buffer; width: number; height: number }> {
  const width = 2000, height = 1500;
  const noise = await sharp({ create: { width, height, channels: 3, background: '#000', noise: { type: 'gaussian', mean: 128, sigma: 40 } } }).raw().toBuffer();
  const jpeg = await sharp(noise, { raw: { width, height, channels: 3 } }).jpeg({ quality: 85 }).toBuffer();
  const rgb = await sharp(jpeg, { failOn: 'error', ignoreIcc: true, autoOrient: false, sequentialRead: true }).removeAlpha().toColourspace('srgb').raw({ depth: 'uchar' }).toBuffer();
  assert.ok(rgb.length >= PIXEL_THREAD_MIN_BYTES);
  return { jpeg, rgb, width, height };
}

test('shm: a large JPEG decoded straight into a slot is sent by reference, with the copied path\'s logits and sharp\'s pixels', async (t) => {
  const { socket } = await startSidecar(t);
  const conn = await SidecarConnection.connect(socket, { helloTimeoutMs: 10_000 });
  t.after(() => conn.close());
  const { jpeg, rgb, width, height } = await bigJpeg();
  const target = (n: number) => conn.frameTarget(n);
  const first = await decodeImage(jpeg, { frameTarget: target }); // asks for slots: none to lend yet
  assert.equal(first.frame, undefined, 'no slot before shm_attach was answered');
  first.release!();
  await waitFor('the shm_attach reply', () => conn.shmStatus === 'ready');
  const copied = await conn.infer({ image: { width, height, data: rgb } });
  const img = await decodeImage(jpeg, { frameTarget: target });
  assert.ok(img.frame, 'expected the image decoded into a slot (frame-decode.ts)');
  assert.equal(conn.frameTarget(img.width * img.height * 3 + 64), undefined, 'the last free slot is kept for copied frames');
  const before = conn.framesViaShm;
  const a = await conn.infer({ image: img });
  assert.equal(conn.framesViaShm - before, 1);
  assert.deepEqual(Buffer.from(a.outputs.logits!.buffer), Buffer.from(copied.outputs.logits!.buffer), 'a frame decoded into the slot gives other logits');
  assert.ok(Buffer.from(img.data.buffer, img.data.byteOffset, img.data.length).equals(rgb), 'the pixels read back differ from sharp\'s raw decode');
  // Another connection's frame is not its own: read back and copied (or sent in the frame), the same logits.
  const other = await SidecarConnection.connect(socket, { helloTimeoutMs: 10_000 });
  t.after(() => other.close());
  const b = await other.infer({ image: img });
  assert.deepEqual(Buffer.from(b.outputs.logits!.buffer), Buffer.from(copied.outputs.logits!.buffer));
  img.release!();
  assert.throws(() => img.data, /released frame/);
  const again = conn.frameTarget(64 + rgb.length);
  assert.ok(again, 'released: the slot is lent again');
  again.release();
  // A corrupt image: the frame is given back and the usual path reports the image's error.
  await assert.rejects(decodeImage(jpeg.subarray(0, jpeg.length >> 1), { frameTarget: target }), (e: unknown) => isRfdetrError(e, 'E_IMAGE_UNDECODABLE'));
  const lent = conn.frameTarget(64 + rgb.length);
  assert.ok(lent, 'the truncated image\'s frame was not given back');
  lent.release();
});

test('shm: a frame whose write fails (ENOSPC) or whose file is not the image decodes on the usual path, and the slot is given back', async (t) => {
  const full = await ShmSlots.open(['/dev/full', '/dev/full'], 64 << 20); // every write to /dev/full fails with ENOSPC
  t.after(() => full.close());
  const { jpeg, rgb } = await bigJpeg();
  const img = await decodeImage(jpeg, { frameTarget: (n) => full.frameTarget(n) });
  assert.equal(img.frame, undefined);
  assert.ok(Buffer.from(img.data.buffer, img.data.byteOffset, img.data.length).equals(rgb));
  img.release!();
  assert.equal(full.held, 0, 'the failed frame still holds its slot');
  // A file that is not the V image asked for: refused by its header check.
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rfdetr-vcheck-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const files = [path.join(dir, 'a'), path.join(dir, 'b')];
  for (const f of files) writeFileSync(f, Buffer.alloc(4096));
  const slots = await ShmSlots.open(files, 1 << 20);
  t.after(() => slots.close());
  const f = slots.frameTarget(64 + 12)!;
  assert.ok(f);
  await sharp({ create: { width: 2, height: 2, channels: 3, background: '#123456' } }).toFile(f.path);
  assert.equal(f.check(2, 2), true, 'a 2×2 RGB V file written by sharp must pass');
  assert.deepEqual([...f.read()], [0x12, 0x34, 0x56, 0x12, 0x34, 0x56, 0x12, 0x34, 0x56, 0x12, 0x34, 0x56]);
  assert.equal(f.check(3, 2), false, 'a width that is not the file\'s must fail');
  await sharp({ create: { width: 2, height: 2, channels: 4, background: '#12345678' } }).toFile(f.path);
  assert.equal(f.check(2, 2), false, '4 bands must fail');
  f.release();
  assert.equal(slots.held, 0);
  // A frame the tmpfs has no room for is not lent (its write would fail and cost a second decode).
  const vast = await ShmSlots.open(files, 2 ** 52);
  t.after(() => vast.close());
  assert.equal(vast.frameTarget(2 ** 51), undefined, 'a frame larger than the free space was lent');
  const small = vast.frameTarget(4096);
  assert.ok(small, 'a small frame must still be lent');
  small.release();
});

test('shm: the frame-link directories of servers that are gone are removed, the others kept', async (t) => {
  const parent = mkdtempSync(path.join(os.tmpdir(), 'rfdetr-sweep-'));
  t.after(() => rmSync(parent, { recursive: true, force: true }));
  const child = run('true');
  const gone = child.pid!;
  await child; // exited and reaped: its pid names no process now
  const dead = path.join(parent, `rfdetr-frames-${gone}-abc123`);
  const mine = path.join(parent, `rfdetr-frames-${process.pid}-abc123`);
  const other = path.join(parent, 'rfdetr-frames-abc123');
  for (const d of [dead, mine, other]) mkdirSync(d);
  symlinkSync('/proc/self/fd/31', path.join(dead, 'slot-0.v'));
  sweepStaleLinkDirs(parent, true);
  assert.equal(existsSync(dead), false, `${dead} of a dead server was left`);
  assert.ok(existsSync(mine), 'this process\'s own directory was removed');
  assert.ok(existsSync(other), 'a directory not named by a pid was removed');
});
