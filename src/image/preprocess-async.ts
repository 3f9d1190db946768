// `decodeAndPreprocessAsync` / `preprocessAsync`: decode and the bit-exact preprocess (preprocess.ts) on a worker
// thread, so the event loop stays free for probes and request handling while an image is resized (about 9 ms of
// CPU for 640x480 and 106 ms for 4000x3000 on this machine; see bench/image). One persistent worker: on a 2-core
// host shared with the sidecar a second one would only compete with the forward. In the worker, decodes run side
// by side in sharp's thread pool and each resize runs when its decode is done.
//
// The worker is unref'd (it never keeps the process alive) and respawned after a crash; a crash rejects every
// pending job. The worker registers tsx's loader itself, however the parent process loaded TypeScript.
import { Worker } from 'node:worker_threads';
import { RfdetrError, type ErrorCode } from '../errors.ts';
import { checkImageBytes, type RgbImage } from './decode.ts';
import { preprocess } from './preprocess.ts';
import type { WorkerError, WorkerJob, WorkerReply } from './preprocess-worker.ts';

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

/** What `decodeAndPreprocessAsync` returns: the model input and the original size, with the worker's timings. */
export interface PreparedImage {
  /** f32 [3,560,560] CHW. */
  pixelValues: Float32Array;
  width: number;
  height: number;
  /** Wall time of the decode and of the preprocess inside the worker (excludes waiting for the worker). */
  decodeMs: number;
  preprocessMs: number;
}

interface Pending { resolve: (v: PreparedImage) => void; reject: (e: Error) => void }

let worker: Worker | null = null;
let nextId = 1;
const pending = new Map<number, Pending>();

function failAll(err: Error): void {
  for (const p of pending.values()) p.reject(err);
  pending.clear();
}

/** Errors come back as plain data: RfdetrErrors keep their code (so HTTP statuses stay right), others their text. */
function toError(e: WorkerError): Error {
  if (e.code) return new RfdetrError(e.code as ErrorCode, e.message, e.details);
  const Ctor = e.name === 'RangeError' ? RangeError : Error;
  return new Ctor(`preprocess worker: ${e.name}: ${e.message}`);
}

function submit(job: WorkerJob, transfer: ArrayBuffer[]): Promise<PreparedImage> {
  const w = getWorker();
  return new Promise<PreparedImage>((resolve, reject) => {
    pending.set(job.id, { resolve, reject });
    w.postMessage(job, transfer);
  });
}

function getWorker(): Worker {
  if (worker) return worker;
  const w = new Worker(BOOTSTRAP, {
    eval: true,
    workerData: { entry: new URL('./preprocess-worker.ts', import.meta.url).href, tsx: import.meta.resolve('tsx/esm/api') },
  });
  w.unref();
  w.on('message', (m: WorkerReply) => {
    const p = pending.get(m.id);
    if (!p) return;
    pending.delete(m.id);
    if ('out' in m) p.resolve({ pixelValues: m.out, width: m.width, height: m.height, decodeMs: m.decodeMs, preprocessMs: m.preprocessMs });
    else p.reject(toError(m.error));
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
 * The image bytes are copied (one memcpy) and the copy transferred to the worker; the caller's image is intact.
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
  // One memcpy into a fresh ArrayBuffer that is then transferred: cheaper on the main thread than letting
  // postMessage serialise and the worker deserialise the bytes (two copies), and the caller's image stays intact.
  const data = new Uint8Array(img.data); // a copy (Buffer.prototype.slice would be a view)
  return submit({ id: nextId++, kind: 'preprocess', data, width: img.width, height: img.height }, [data.buffer as ArrayBuffer]).then((r) => r.pixelValues);
}

/**
 * Decodes (decodeImage) and preprocesses encoded image bytes on the worker: the main thread only copies the
 * compressed bytes (at most 32 MiB, usually far less) instead of the decoded pixels. Same errors as
 * decodeImage (RfdetrError E_IMAGE_UNDECODABLE / E_IMAGE_TOO_LARGE); the size checks run before any copy.
 */
export function decodeAndPreprocessAsync(bytes: Buffer | Uint8Array): Promise<PreparedImage> {
  try {
    checkImageBytes(bytes);
  } catch (e) {
    return Promise.reject(e);
  }
  const copy = new Uint8Array(bytes); // a copy (Buffer.prototype.slice would be a view)
  return submit({ id: nextId++, kind: 'decode', bytes: copy }, [copy.buffer as ArrayBuffer]);
}

/** Stops the worker (pending images are rejected); the next preprocessAsync starts a new one. */
export async function closePreprocessWorker(): Promise<void> {
  const w = worker;
  worker = null;
  if (!w) return;
  failAll(new Error('preprocess worker closed'));
  await w.terminate();
}
