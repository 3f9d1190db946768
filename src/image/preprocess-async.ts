// `preprocessAsync`: the bit-exact preprocess (preprocess.ts) on a worker thread, so the event loop stays free
// for probes and request handling while an image is resized (about 8-14 ms of CPU for 640x480 and 105-140 ms
// for 4000x3000 on this machine; see bench/image). One persistent worker: on a 2-core host shared with the sidecar
// a second one would only compete with the forward. Jobs queue in the worker in arrival order.
//
// The worker is unref'd (it never keeps the process alive) and respawned after a crash; a crash rejects every
// pending job. The worker registers tsx's loader itself, however the parent process loaded TypeScript.
import { Worker } from 'node:worker_threads';
import type { RgbImage } from './decode.ts';
import { preprocess } from './preprocess.ts';

/** Images with fewer pixels than this are preprocessed inline (default 0: always on the worker). */
export interface PreprocessAsyncOptions {
  inlineBelowPixels?: number;
}

// Plain-JS bootstrap: registers tsx's ESM loader in the worker (hooks are per thread), then loads the worker module.
const BOOTSTRAP = `
const { workerData } = require('node:worker_threads');
import(workerData.tsx)
  .then((tsx) => { tsx.register(); return import(workerData.entry); })
  .catch((e) => setImmediate(() => { throw e; }));
`;

interface Pending { resolve: (v: Float32Array) => void; reject: (e: Error) => void }

let worker: Worker | null = null;
let nextId = 1;
const pending = new Map<number, Pending>();

function failAll(err: Error): void {
  for (const p of pending.values()) p.reject(err);
  pending.clear();
}

function getWorker(): Worker {
  if (worker) return worker;
  const w = new Worker(BOOTSTRAP, {
    eval: true,
    workerData: { entry: new URL('./preprocess-worker.ts', import.meta.url).href, tsx: import.meta.resolve('tsx/esm/api') },
  });
  w.unref();
  w.on('message', (m: { id: number; out?: Float32Array; error?: string }) => {
    const p = pending.get(m.id);
    if (!p) return;
    pending.delete(m.id);
    if (m.out) p.resolve(m.out);
    else p.reject(new Error(`preprocess worker: ${m.error}`));
  });
  w.on('error', (e) => {
    if (worker === w) worker = null;
    failAll(new Error(`preprocess worker failed: ${e.message}; the next image starts a new worker`, { cause: e }));
  });
  w.on('exit', (code) => {
    if (worker === w) worker = null;
    if (pending.size) failAll(new Error(`preprocess worker exited with code ${code} while ${pending.size} image(s) were pending; the next image starts a new worker`));
  });
  worker = w;
  return w;
}

/**
 * pixel_values f32 [3,560,560], identical to `preprocess(img)`, computed on the preprocess worker thread.
 * The image bytes are copied to the worker; the caller's image is left intact.
 */
export function preprocessAsync(img: RgbImage, opts: PreprocessAsyncOptions = {}): Promise<Float32Array> {
  if (img.width * img.height < (opts.inlineBelowPixels ?? 0)) {
    try {
      return Promise.resolve(preprocess(img));
    } catch (e) {
      return Promise.reject(e);
    }
  }
  if (img.data.length !== img.width * img.height * 3) {
    return Promise.reject(new RangeError(`preprocess: expected ${img.width}*${img.height}*3 = ${img.width * img.height * 3} RGB bytes but received ${img.data.length}`));
  }
  const w = getWorker();
  const id = nextId++;
  const whole = img.data.byteOffset === 0 && img.data.byteLength === img.data.buffer.byteLength;
  const data = whole ? img.data : img.data.slice();
  return new Promise<Float32Array>((resolve, reject) => {
    pending.set(id, { resolve, reject });
    w.postMessage({ id, data, width: img.width, height: img.height });
  });
}

/** Stops the worker (pending images are rejected); the next preprocessAsync starts a new one. */
export async function closePreprocessWorker(): Promise<void> {
  const w = worker;
  worker = null;
  if (!w) return;
  failAll(new Error('preprocess worker closed'));
  await w.terminate();
}
