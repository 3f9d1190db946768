// Worker-thread side of preprocess-async.ts: each message is either an RGB image to preprocess or encoded image
// bytes to decode and preprocess; the answer carries the pixel_values buffer (transferred, not copied) or the
// error with its RfdetrError code. Started by preprocess-async.ts; never imported by anything else.
import { parentPort } from 'node:worker_threads';
import { isRfdetrError } from '../errors.ts';
import { decodeImage } from './decode.ts';
import { preprocess } from './preprocess.ts';

export type WorkerJob =
  | { id: number; kind: 'preprocess'; data: Uint8Array; width: number; height: number }
  | { id: number; kind: 'decode'; bytes: Uint8Array };

export interface WorkerError { name: string; message: string; code?: string; details?: Record<string, unknown> }

export type WorkerReply =
  | { id: number; out: Float32Array; width: number; height: number; decodeMs: number; preprocessMs: number }
  | { id: number; error: WorkerError };

const port = parentPort;
if (!port) throw new Error('preprocess-worker.ts must run in a worker thread (it is started by preprocess-async.ts)');

async function run(job: WorkerJob): Promise<WorkerReply> {
  let decodeMs = 0;
  let img;
  if (job.kind === 'decode') {
    const t0 = performance.now();
    img = await decodeImage(job.bytes);
    decodeMs = performance.now() - t0;
  } else {
    img = { data: job.data, width: job.width, height: job.height };
  }
  const t1 = performance.now();
  const out = preprocess(img);
  return { id: job.id, out, width: img.width, height: img.height, decodeMs, preprocessMs: performance.now() - t1 };
}

// Jobs are not serialised: decodes run in the libuv pool side by side, and each preprocess (synchronous) runs as
// soon as its image is decoded. Replies are matched by id, so their order does not matter.
port.on('message', (job: WorkerJob) => {
  run(job).then(
    (reply) => port.postMessage(reply, 'out' in reply ? [reply.out.buffer as ArrayBuffer] : []),
    (e: unknown) => {
      const error: WorkerError = e instanceof Error ? { name: e.name, message: e.message } : { name: 'Error', message: String(e) };
      if (isRfdetrError(e)) {
        error.code = e.code;
        if (e.details) error.details = e.details;
      }
      port.postMessage({ id: job.id, error } satisfies WorkerReply);
    },
  );
});
