// The decode thread of pixel-pool.ts: decodes one image with sharp (the same calls as rgb-pipeline.ts) and copies
// its RGB bytes into the shared buffer the main thread lent it, so the 36 MB sharp allocates for a 12 MP
// photo is this thread's garbage, collected by this isolate's GC, never the event loop's.
//
// The thread runs from this source text (Worker `eval`), not from a module file: a worker does not get the
// main thread's module hooks (tsx, under which the tests and benches run), and plain CommonJS needs none.
// sharp is resolved by the main thread and passed in `workerData.sharp`.
import type { SharpOptions } from 'sharp';

export interface PixelJob {
  id: number;
  /** The encoded image, transferred (the thread owns it). */
  bytes: ArrayBuffer;
  options: SharpOptions;
  /** Where the RGB bytes go (a buffer of the pool, at least width·height·3 bytes). */
  into: SharedArrayBuffer;
}
export type PixelReply = { id: number; ok: true; width: number; height: number; channels: number; length: number } | { id: number; ok: false; message: string };

export const PIXEL_THREAD_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const sharp = require(workerData.sharp);
parentPort.on('message', async (job) => {
  try {
    const { data, info } = await sharp(new Uint8Array(job.bytes), job.options).removeAlpha().toColourspace('srgb').raw({ depth: 'uchar' }).toBuffer({ resolveWithObject: true });
    if (data.length > job.into.byteLength) throw new Error('sharp returned ' + data.length + ' bytes for a ' + job.into.byteLength + '-byte buffer');
    new Uint8Array(job.into, 0, data.length).set(data);
    parentPort.postMessage({ id: job.id, ok: true, width: info.width, height: info.height, channels: info.channels, length: data.length });
  } catch (e) {
    parentPort.postMessage({ id: job.id, ok: false, message: (e && e.message) || String(e) });
  }
});
`;
