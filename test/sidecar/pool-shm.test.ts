// A pool's transport (SidecarPool.prepare): a large JPEG is decoded straight into a shared-memory slot of one of
// its members (frame-decode.ts), and the request goes to that member, which takes the frame by reference (its
// pixels never read back here). Against two real test sidecars (engine test-echo: logits = pixel_values + 1,
// so equal logits mean equal model input).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { packageRoot } from '../../src/config/paths.ts';
import { PIXEL_THREAD_MIN_BYTES } from '../../src/image/pixel-pool.ts';
import { createPool, type SidecarBackendOptions } from '../../src/sidecar/index.ts';
import type { Prepared } from '../../src/sidecar/transport.ts';
import { waitFor } from '../helpers/wait-for.ts';

const testBinary = path.join(packageRoot, 'sidecar', 'build', 'rfdetr-sidecar-test');

test('pool (--workers 2): a large JPEG is decoded into a member\'s shared-memory slot and sent to it by reference', async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rfdetr-pool-shm-'));
  const members = [0, 1].map((i): SidecarBackendOptions & { label: string } => ({
    label: `worker-${i}`, engine: 'test-echo', weightsDir: dir, command: { file: testBinary },
  }));
  const p = createPool({ members, minReady: 2 });
  t.after(() => {
    p.destroy();
    rmSync(dir, { recursive: true, force: true });
  });
  await p.ready(60_000);
  // A noisy 2000×1500 JPEG: 9 MB of pixels, a large image (decode.ts).
  const width = 2000, height = 1500;
  const noise = await sharp({ create: { width, height, channels: 3, background: '#000', noise: { type: 'gaussian', mean: 128, sigma: 40 } } }).raw().toBuffer();
  const jpeg = await sharp(noise, { raw: { width, height, channels: 3 } }).jpeg({ quality: 85 }).toBuffer();
  const rgb = await sharp(jpeg, { failOn: 'error', ignoreIcc: true, autoOrient: false, sequentialRead: true }).removeAlpha().toColourspace('srgb').raw({ depth: 'uchar' }).toBuffer();
  assert.ok(rgb.length >= PIXEL_THREAD_MIN_BYTES);
  const copied = await p.infer({ image: { width, height, data: rgb } });

  // A member asks its sidecar for slots on the first large frame and lends none until they are attached; each
  // lends one of its two (the other is kept for copied frames). Two frames held at once: one in each member's
  // slot, so whichever member a request would be picked for, one of the two frames is not that member's.
  const inSlot = async (): Promise<Prepared> => waitFor('a frame decoded into a slot', async (): Promise<Prepared | undefined> => {
    const pr = await p.prepare({ file: jpeg });
    assert.equal(pr.by, 'server', 'a large JPEG is decoded here');
    if (pr.image?.frame) return pr;
    pr.release();
    return undefined;
  }, 20_000);
  const frames = [await inSlot(), await inSlot()];
  for (const prepared of frames) {
    const frame = prepared.image!.frame!;
    let readBack = 0;
    const read = frame.read.bind(frame);
    frame.read = () => (readBack++, read());
    const before = [0, 1].map((i) => p.member(`worker-${i}`)!.framesViaShm);
    const r = await prepared.send((input) => p.infer(input));
    const after = [0, 1].map((i) => p.member(`worker-${i}`)!.framesViaShm);
    prepared.release();
    assert.equal(readBack, 0, 'the pixels were read back to be copied: the frame went to a member that does not hold its slot');
    assert.equal(after[0]! + after[1]! - before[0]! - before[1]!, 1, 'one frame through shared memory');
    assert.deepEqual(Buffer.from(r.outputs.logits!.buffer), Buffer.from(copied.outputs.logits!.buffer), 'the slot\'s pixels are sharp\'s');
  }
  assert.deepEqual([0, 1].map((i) => p.member(`worker-${i}`)!.framesViaShm > 0), [true, true], 'each member took one by reference');
});
