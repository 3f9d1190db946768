// The large-image decode thread (src/image/pixel-pool.ts): the same pixels as sharp on the main path, the
// buffers reused, sharp's errors worded as before, and a dead thread answered by the main path.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import sharp from 'sharp';
import { decodeImage } from '../../src/image/decode.ts';
import { PIXEL_THREAD_MIN_BYTES, PixelPool, PixelThreadError } from '../../src/image/pixel-pool.ts';
import { isRfdetrError } from '../../src/errors.ts';

const OPTIONS = { failOn: 'error', ignoreIcc: true, autoOrient: false, sequentialRead: true } as const;

/** A noisy 2000×1500 JPEG (9 MB of pixels: at the thread's threshold), and sharp's own decode of it. */
async function bigJpeg(): Promise<{ jpeg: Buffer; rgb: Buffer; width: number; height: number }> {
  const width = 2000, height = 1500;
  const noise = await sharp({ create: { width, height, channels: 3, background: '#000', noise: { type: 'gaussian', mean: 128, sigma: 40 } } }).raw().toBuffer();
  const jpeg = await sharp(noise, { raw: { width, height, channels: 3 } }).jpeg({ quality: 85 }).toBuffer();
  const rgb = await sharp(jpeg, OPTIONS).removeAlpha().toColourspace('srgb').raw({ depth: 'uchar' }).toBuffer();
  assert.ok(rgb.length >= PIXEL_THREAD_MIN_BYTES, `the fixture must be at the threshold (${rgb.length} bytes)`);
  return { jpeg, rgb, width, height };
}

test('pixel-pool: a large JPEG goes through the thread while another large image is alive, with every byte of the main-path decode', async () => {
  const { jpeg, rgb, width, height } = await bigJpeg();
  const same = (img: { data: Uint8Array }) => Buffer.from(img.data.buffer, img.data.byteOffset, img.data.length).equals(rgb);
  const pooled = (img: { data: Uint8Array }) => img.data.buffer instanceof SharedArrayBuffer;
  // Alone: decoded here (a lone request would pay the thread's copy for nothing), still with a release.
  const alone = await decodeImage(jpeg);
  assert.ok(!pooled(alone), 'a lone large image must decode on the main path');
  assert.ok(same(alone));
  assert.equal(typeof alone.release, 'function');
  // While it is alive (not released), the next one goes through the thread into a pool buffer.
  const img = await decodeImage(jpeg);
  assert.equal(img.width, width);
  assert.equal(img.height, height);
  assert.ok(pooled(img), 'expected the second image in a pool buffer (SharedArrayBuffer): the thread path was not taken');
  assert.ok(same(img), 'pixels differ from sharp on the main path');
  const here = await decodeImage(jpeg, { thread: false });
  assert.ok(!pooled(here), 'thread: false must decode on this thread');
  assert.ok(same(here));
  here.release!();
  process.env.RFDETR_DECODE_THREAD = 'off';
  try {
    const off = await decodeImage(jpeg);
    assert.ok(!pooled(off), 'RFDETR_DECODE_THREAD=off must decode on the main path');
    assert.ok(same(off));
    off.release!();
  } finally {
    delete process.env.RFDETR_DECODE_THREAD;
  }
  img.release!();
  alone.release!();
  alone.release!(); // twice is once
  const again = await decodeImage(jpeg);
  assert.ok(!pooled(again), 'once every large image was released, the next is alone again');
  again.release!();
});

test('pixel-pool: a released buffer is reused for the next image of about its size, an unreleased one is not', async () => {
  const { jpeg, rgb } = await bigJpeg();
  const pool = new PixelPool(1);
  try {
    const a = await pool.decode(jpeg, OPTIONS, rgb.length);
    const held = await pool.decode(jpeg, OPTIONS, rgb.length);
    assert.notEqual(held.data.buffer, a.data.buffer, 'two images in flight share a buffer');
    a.release();
    a.release(); // twice is once
    assert.equal(pool.idleBuffers, 1);
    const b = await pool.decode(jpeg, OPTIONS, rgb.length);
    assert.equal(b.data.buffer, a.data.buffer, 'expected the released buffer to be reused');
    assert.equal(pool.idleBuffers, 0);
    assert.ok(Buffer.from(b.data.buffer, 0, b.data.length).equals(rgb));
    // Far smaller images do not take (and pin) a large buffer.
    b.release();
    const small = await sharp({ create: { width: 64, height: 64, channels: 3, background: '#808080' } }).jpeg().toBuffer();
    const c = await pool.decode(small, OPTIONS, 64 * 64 * 3);
    assert.notEqual(c.data.buffer, a.data.buffer);
    assert.equal(c.data.length, 64 * 64 * 3);
    held.release();
  } finally {
    await pool.close();
  }
});

test('pixel-pool: a truncated large JPEG fails with the same E_IMAGE_UNDECODABLE as on the main path', async () => {
  const { jpeg } = await bigJpeg();
  // A view into the whole file: the thread must get only the bytes viewed.
  const cut = jpeg.subarray(0, jpeg.length >> 1);
  const message = async () => {
    try {
      await decodeImage(cut);
    } catch (e) {
      assert.ok(isRfdetrError(e, 'E_IMAGE_UNDECODABLE'), `expected E_IMAGE_UNDECODABLE, got ${String(e)}`);
      return (e as Error).message;
    }
    assert.fail('a truncated JPEG decoded');
  };
  try {
    process.env.RFDETR_DECODE_THREAD = 'on';
    const threaded = await message();
    process.env.RFDETR_DECODE_THREAD = 'off';
    assert.equal(threaded, await message());
  } finally {
    delete process.env.RFDETR_DECODE_THREAD;
  }
  // The failed decodes gave their place back: the next large image is alone, so it decodes on the main path.
  const next = await decodeImage(jpeg);
  assert.ok(!(next.data.buffer instanceof SharedArrayBuffer), 'a failed large decode still counts as alive: the next lone image took the thread');
  next.release!();
});

test('pixel-pool: a thread that dies fails its decode with PixelThreadError, and the next decode gets a new thread', async () => {
  const { jpeg, rgb } = await bigJpeg();
  const pool = new PixelPool(1);
  try {
    const first = await pool.decode(jpeg, OPTIONS, rgb.length);
    first.release();
    // Kill the thread while it decodes: the pending decode must reject, not hang.
    const pending = pool.decode(jpeg, OPTIONS, rgb.length);
    await pool.close();
    await assert.rejects(pending, PixelThreadError);
    const again = await pool.decode(jpeg, OPTIONS, rgb.length);
    assert.ok(Buffer.from(again.data.buffer, 0, again.data.length).equals(rgb));
    again.release();
  } finally {
    await pool.close();
  }
});

test('pixel-pool: after IDLE_MS unused, the idle buffers and then the idle threads are dropped (their memory goes back)', async (t) => {
  const { jpeg, rgb } = await bigJpeg();
  const pool = new PixelPool(1);
  try {
    const a = await pool.decode(jpeg, OPTIONS, rgb.length);
    assert.equal(pool.threads, 1);
    // The pool's clock and its timer under the test's control from here on.
    let now = performance.now();
    t.mock.method(performance, 'now', () => now);
    t.mock.timers.enable({ apis: ['setTimeout'] });
    a.release();
    assert.equal(pool.idleBuffers, 1);
    now += 9_999;
    t.mock.timers.tick(9_999);
    assert.deepEqual([pool.idleBuffers, pool.threads], [1, 1], 'kept before IDLE_MS');
    now += 1;
    t.mock.timers.tick(1);
    assert.deepEqual([pool.idleBuffers, pool.threads], [0, 0], 'buffer and thread dropped at IDLE_MS');
    t.mock.timers.reset();
    // The next large decode starts a new thread and gives the same pixels.
    const b = await pool.decode(jpeg, OPTIONS, rgb.length);
    assert.equal(pool.threads, 1);
    assert.ok(Buffer.from(b.data.buffer, 0, b.data.length).equals(rgb));
    b.release();
  } finally {
    await pool.close();
  }
});
