// Decode + preprocess in worker threads. The resize runs in JavaScript (bit-exact f32 fma) and costs ~30 ms
// for a 640×480 image and seconds for 8192×8192 (measured on this 2-core box); on the server's event loop that
// would stall every probe and request for that long. A worker per slot keeps the loop free, and lets queued
// images be prepared on other cores while the engine runs a forward.
import { Worker } from 'node:worker_threads';
import { ERRORS, RfdetrError, type ErrorCode } from '../errors.ts';
import type { PrepReply, PrepRequest } from './prep-worker.ts';

export interface PrepResult {
  pixels: Float32Array;
  width: number;
  height: number;
  decodeMs: number;
  preprocessMs: number;
}

interface Slot {
  worker: Worker;
  /** Busy until the worker has loaded its modules, then while it holds a job. */
  busy: boolean;
  hasStarted: boolean;
  job?: { id: number; resolve: (r: PrepResult) => void; reject: (e: Error) => void };
}

const WORKER_URL = new URL('./prep-worker.ts', import.meta.url).href;

// The worker runs TypeScript sources. Node 20 does not apply the parent's (or an execArgv `--import`) tsx
// hooks to a worker's entry module, so a small CommonJS bootstrap registers tsx's ESM hooks in the worker and
// then imports the worker module.
const BOOTSTRAP = `import(${JSON.stringify(import.meta.resolve('tsx/esm/api'))})
  .then((tsx) => { tsx.register(); return import(${JSON.stringify(WORKER_URL)}); })
  .catch((e) => { process.nextTick(() => { throw e; }); });`;

export class PrepPool {
  private readonly slots: Slot[] = [];
  private readonly waiting: Array<{ bytes: Uint8Array; resolve: (r: PrepResult) => void; reject: (e: Error) => void }> = [];
  private nextId = 1;
  private closed = false;
  private startFailure: Error | undefined;
  /** Resolves once every initial worker has loaded decode + preprocess (sharp, tsx); rejects if one cannot. */
  readonly ready: Promise<void>;

  constructor(readonly size: number) {
    if (!Number.isInteger(size) || size < 1) throw new RangeError(`Expected an integer >= 1 for prep workers but received ${size}`);
    const started: Promise<void>[] = [];
    for (let i = 0; i < size; i++) {
      const slot = this.spawn();
      this.slots.push(slot);
      started.push(slot.started);
    }
    this.ready = Promise.all(started).then(() => undefined);
    this.ready.catch(() => {});
  }

  private spawn(): Slot & { started: Promise<void> } {
    const worker = new Worker(BOOTSTRAP, { eval: true });
    worker.unref();
    let onStarted!: () => void;
    let onFailed!: (e: Error) => void;
    const started = new Promise<void>((res, rej) => {
      onStarted = res;
      onFailed = rej;
    });
    const slot: Slot & { started: Promise<void> } = { worker, busy: true, hasStarted: false, started };
    worker.on('message', (m: PrepReply) => {
      if ('ready' in m) {
        slot.busy = false;
        slot.hasStarted = true;
        onStarted();
        this.pump();
        return;
      }
      const job = slot.job;
      if (!job || job.id !== m.id) return;
      slot.job = undefined;
      slot.busy = false;
      if (m.ok) job.resolve({ pixels: m.pixels, width: m.width, height: m.height, decodeMs: m.decodeMs, preprocessMs: m.preprocessMs });
      else {
        const code = m.error.code && m.error.code in ERRORS ? (m.error.code as ErrorCode) : undefined;
        job.reject(code ? new RfdetrError(code, m.error.message, m.error.details) : Object.assign(new Error(m.error.message), { name: m.error.name }));
      }
      this.pump();
    });
    const onDeath = (err: Error) => {
      const i = this.slots.indexOf(slot);
      if (i < 0) return;
      this.slots.splice(i, 1);
      const job = slot.job;
      slot.job = undefined;
      job?.reject(new RfdetrError('E_INTERNAL', `the image worker died while decoding (${err.message}): the image may be too large for the available memory`));
      if (this.closed) return;
      if (slot.hasStarted) {
        // A worker that died on a job is replaced; one that never started is not retried in a loop.
        this.slots.push(this.spawn());
        this.pump();
      } else {
        onFailed(new Error(`an image worker failed to start: ${err.message}`, { cause: err }));
        if (this.slots.length === 0) {
          this.startFailure = new RfdetrError('E_INTERNAL', `no image worker could start (${err.message}): the server cannot decode images`);
          for (const w of this.waiting.splice(0)) w.reject(this.startFailure);
        }
      }
    };
    worker.on('error', onDeath);
    worker.on('exit', (code) => {
      if (this.slots.includes(slot)) onDeath(new Error(`exit code ${code}`));
    });
    return slot;
  }

  run(bytes: Uint8Array): Promise<PrepResult> {
    if (this.closed) return Promise.reject(new RfdetrError('E_DRAINING', 'the image workers are stopped: the server is shutting down'));
    if (this.startFailure) return Promise.reject(this.startFailure);
    return new Promise((resolve, reject) => {
      this.waiting.push({ bytes, resolve, reject });
      this.pump();
    });
  }

  private pump(): void {
    for (const slot of this.slots) {
      if (this.waiting.length === 0) return;
      if (slot.busy) continue;
      const next = this.waiting.shift()!;
      const id = this.nextId++;
      slot.busy = true;
      slot.job = { id, resolve: next.resolve, reject: next.reject };
      // A private copy: transferred, so the caller's buffer (possibly a slice of a pooled one) is untouched.
      const bytes = new Uint8Array(next.bytes);
      const msg: PrepRequest = { id, bytes };
      slot.worker.postMessage(msg, [bytes.buffer]);
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    const err = new RfdetrError('E_DRAINING', 'the image workers are stopped: the server is shutting down');
    for (const w of this.waiting.splice(0)) w.reject(err);
    const slots = this.slots.splice(0);
    await Promise.all(slots.map((s) => s.worker.terminate()));
    for (const s of slots) s.job?.reject(err);
  }
}
