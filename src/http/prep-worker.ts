// Worker-thread side of the prep pool: decode + preprocess one image per message, off the server's event
// loop. The pixel_values buffer is transferred back (no copy); errors travel as {code, message, details}.
import { parentPort } from 'node:worker_threads';
import { decodeImage } from '../image/decode.ts';
import { preprocess } from '../image/preprocess.ts';
import { isRfdetrError } from '../errors.ts';

export interface PrepRequest {
  id: number;
  bytes: Uint8Array;
}

export type PrepReply =
  | { id: 0; ready: true }
  | { id: number; ok: true; pixels: Float32Array; width: number; height: number; decodeMs: number; preprocessMs: number }
  | { id: number; ok: false; error: { code?: string; name: string; message: string; details?: Record<string, unknown> } };

const port = parentPort;
if (!port) throw new Error('prep-worker.ts must run in a worker thread (it is started by PrepPool)');

port.postMessage({ id: 0, ready: true } satisfies PrepReply);

port.on('message', async (req: PrepRequest) => {
  try {
    const t0 = performance.now();
    const img = await decodeImage(req.bytes);
    const t1 = performance.now();
    const pixels = preprocess(img);
    const t2 = performance.now();
    const reply: PrepReply = { id: req.id, ok: true, pixels, width: img.width, height: img.height, decodeMs: t1 - t0, preprocessMs: t2 - t1 };
    port.postMessage(reply, [pixels.buffer as ArrayBuffer]);
  } catch (e) {
    const err = e as Error;
    const reply: PrepReply = {
      id: req.id,
      ok: false,
      error: { code: isRfdetrError(e) ? e.code : undefined, name: err?.name ?? 'Error', message: err?.message ?? String(e), details: isRfdetrError(e) ? e.details : undefined },
    };
    port.postMessage(reply);
  }
});
