// Worker-thread side of `preprocessAsync`: one message per image, answered with the pixel_values buffer
// (transferred, not copied). Started by preprocess-async.ts; never imported by anything else.
import { parentPort } from 'node:worker_threads';
import { preprocess } from './preprocess.ts';

interface Job { id: number; data: Uint8Array; width: number; height: number }

const port = parentPort;
if (!port) throw new Error('preprocess-worker.ts must run in a worker thread (it is started by preprocessAsync)');
port.on('message', (job: Job) => {
  try {
    const out = preprocess({ data: job.data, width: job.width, height: job.height });
    port.postMessage({ id: job.id, out }, [out.buffer as ArrayBuffer]);
  } catch (e) {
    port.postMessage({ id: job.id, error: e instanceof Error ? `${e.name}: ${e.message}` : String(e) });
  }
});
