// Large decodes off the event loop's heap: a few decode threads (worker_threads running pixel-thread.ts's
// source) and a pool of reused SharedArrayBuffers they write the RGB bytes into. Why: a 4000×3000 photo is a
// 36 MB buffer, and every such buffer sharp hands the main thread is external memory V8 answers with
// incremental-marking steps (5–10 ms each by design) and a mark-compact roughly every other request. Under
// 8 clients sending 12 MP JPEGs that was the event loop's p99 delay (trace-gc: ~0.6 mark-compacts per
// request, steps up to 48 ms on the loaded host; bench/server/RESULTS.md §7). Here sharp's buffer is the
// thread's garbage, and the main thread only ever sees pool buffers, allocated once and reused. The price: the hop
// and a 36 MB copy into the pool buffer, 8–15 ms of a 12 MP decode (RESULTS.md §7), which is why decode.ts
// takes this path only while another large image is alive.
//
// The pixels are bit-identical to decode.ts's own call (the same sharp pipeline; test/image/pixel-pool.test.ts).
// A thread that dies fails only its pending decodes with PixelThreadError, which decode.ts answers by decoding
// on its own path; the next decode starts a new thread. A buffer is given back when its frame is done with it
// (the transport's Prepared.release(), src/sidecar/transport.ts); a request abandoned (deadline, abort) while
// its frame is still being written to the sidecar may then send pixels of the next image in that buffer: the
// framing is in a separate header buffer, and only that abandoned request's reply, which nobody reads, can
// differ.
import { createRequire } from 'node:module';
import os from 'node:os';
import { Worker } from 'node:worker_threads';
import type { SharpOptions } from 'sharp';
import { PIXEL_THREAD_SOURCE, type PixelJob, type PixelReply } from './pixel-thread.ts';

/**
 * Decoded images of at least this many bytes go through the threads (8 MiB ≈ 2.8 MP, where the frames leave
 * shared memory for the socket, src/sidecar/client.ts); smaller ones cost the main thread little GC and
 * would pay the thread hop and the copy for nothing.
 */
export const PIXEL_THREAD_MIN_BYTES = 8 << 20;
/** Idle buffers kept for reuse: at most this many, and this many bytes; unused for IDLE_MS, they are dropped. */
const KEEP = 4;
const KEEP_BYTES = 256 << 20;
const IDLE_MS = 10_000;
/** A buffer is reused for an image of at least 1/REUSE_SLACK of its size (else a new one is allocated). */
const REUSE_SLACK = 1.5;

/** The thread running a decode exited or failed to start: the caller decodes on its own path instead. */
export class PixelThreadError extends Error {}

/** Decoded RGB pixels in a pool buffer; `release()` gives the buffer back (the pixels must not be read after). */
export interface PooledPixels {
  data: Uint8Array;
  width: number;
  height: number;
  channels: number;
  release: () => void;
}

interface Thread {
  worker: Worker;
  pending: Map<number, { resolve: (r: PixelReply) => void; reject: (e: Error) => void }>;
}

const sharpPath = createRequire(import.meta.url).resolve('sharp');

export class PixelPool {
  readonly #threads: Thread[] = [];
  readonly #maxThreads: number;
  readonly #free: Array<{ buf: SharedArrayBuffer; since: number }> = [];
  #nextId = 1;
  #trim: NodeJS.Timeout | undefined;

  constructor(maxThreads = Math.max(1, Math.min(4, os.availableParallelism()))) {
    this.#maxThreads = maxThreads;
  }

  /** Decode threads running (for tests). */
  get threads(): number {
    return this.#threads.length;
  }

  /** Buffers waiting for reuse (for tests and the bench). */
  get idleBuffers(): number {
    return this.#free.length;
  }

  /**
   * Decodes `bytes` with sharp's 8-bit RGB pipeline (`options` as decode.ts passes them) in a thread, into a
   * pool buffer of at least `bytesOut` bytes. Rejects with sharp's own error, or PixelThreadError when the
   * thread died.
   */
  async decode(bytes: Uint8Array, options: SharpOptions, bytesOut: number): Promise<PooledPixels> {
    const buf = this.#take(bytesOut);
    let reply: PixelReply;
    try {
      reply = await this.#run(bytes, options, buf);
    } catch (e) {
      this.#give(buf);
      throw e;
    }
    if (!reply.ok) {
      this.#give(buf);
      throw new Error(reply.message);
    }
    let released = false;
    return {
      data: new Uint8Array(buf, 0, reply.length), width: reply.width, height: reply.height, channels: reply.channels,
      release: () => {
        if (released) return;
        released = true;
        this.#give(buf);
      },
    };
  }

  /** Stops the threads and drops the idle buffers; pending decodes fail with PixelThreadError. */
  async close(): Promise<void> {
    if (this.#trim) clearTimeout(this.#trim);
    this.#trim = undefined;
    this.#free.length = 0;
    await Promise.all(this.#threads.splice(0).map((t) => t.worker.terminate()));
  }

  #run(bytes: Uint8Array, options: SharpOptions, into: SharedArrayBuffer): Promise<PixelReply> {
    const t = this.#thread();
    const id = this.#nextId++;
    // A copy of exactly the image's bytes, transferred: the buffer `bytes` views may be larger (a body, Node's
    // Buffer pool) and must stay usable here. (Buffer#slice would not copy.)
    const copy = new ArrayBuffer(bytes.byteLength);
    new Uint8Array(copy).set(bytes);
    return new Promise((resolve, reject) => {
      // Referenced while it has work (the process waits for its pixels), not while idle.
      if (t.pending.size === 0) t.worker.ref();
      t.pending.set(id, { resolve, reject });
      t.worker.postMessage({ id, bytes: copy, options, into } satisfies PixelJob, [copy]);
    });
  }

  /** The thread with the fewest decodes pending; a new one while fewer than the maximum exist and all are busy. */
  #thread(): Thread {
    let best: Thread | undefined;
    for (const t of this.#threads) if (!best || t.pending.size < best.pending.size) best = t;
    if (best && (best.pending.size === 0 || this.#threads.length >= this.#maxThreads)) return best;
    const worker = new Worker(PIXEL_THREAD_SOURCE, { eval: true, workerData: { sharp: sharpPath } });
    const t: Thread = { worker, pending: new Map() };
    worker.on('message', (r: PixelReply) => {
      const p = t.pending.get(r.id);
      t.pending.delete(r.id);
      if (t.pending.size === 0) worker.unref();
      p?.resolve(r);
    });
    const dead = (why: string) => {
      const i = this.#threads.indexOf(t);
      if (i >= 0) this.#threads.splice(i, 1);
      for (const p of t.pending.values()) p.reject(new PixelThreadError(`the decode thread ${why}; decoding on the main path instead`));
      t.pending.clear();
    };
    worker.on('error', (e) => dead(`failed: ${e.message}`));
    worker.on('exit', (code) => dead(`exited with code ${code}`));
    // After the listeners (adding a 'message' listener refs the port again): an idle thread never keeps the process alive.
    worker.unref();
    this.#threads.push(t);
    return t;
  }

  #take(n: number): SharedArrayBuffer {
    let best = -1;
    for (let i = 0; i < this.#free.length; i++) {
      const len = this.#free[i]!.buf.byteLength;
      if (len >= n && len <= n * REUSE_SLACK && (best < 0 || len < this.#free[best]!.buf.byteLength)) best = i;
    }
    if (best >= 0) return this.#free.splice(best, 1)[0]!.buf;
    return new SharedArrayBuffer(n);
  }

  #give(buf: SharedArrayBuffer): void {
    this.#free.push({ buf, since: performance.now() });
    // Over the limits: the smallest go first (the large ones are what the pool saves allocating).
    this.#free.sort((a, b) => b.buf.byteLength - a.buf.byteLength);
    let bytes = this.#free.reduce((n, f) => n + f.buf.byteLength, 0);
    while (this.#free.length > KEEP || (this.#free.length > 1 && bytes > KEEP_BYTES)) bytes -= this.#free.pop()!.buf.byteLength;
    if (!this.#trim) {
      this.#trim = setTimeout(() => this.#dropIdle(), IDLE_MS);
      this.#trim.unref();
    }
  }

  #dropIdle(): void {
    this.#trim = undefined;
    // 1 ms of slack: the timer fires IDLE_MS after the buffer came back, and the float subtraction can land a hair short of it.
    const old = performance.now() - IDLE_MS + 1;
    for (let i = this.#free.length - 1; i >= 0; i--) if (this.#free[i]!.since <= old) this.#free.splice(i, 1);
    if (this.#free.length > 0) {
      this.#trim = setTimeout(() => this.#dropIdle(), IDLE_MS);
      this.#trim.unref();
      return;
    }
    // Nothing kept: the idle threads go too. A thread's isolate still references the buffers it wrote into
    // until its own GC, which an idle thread never runs, and its image library keeps its working memory; in
    // the red-team bench that held ~500 MB of the server's RSS after 60 s idle (bench/README.md). The next
    // large decode starts a new thread.
    for (const t of this.#threads.filter((x) => x.pending.size === 0)) {
      this.#threads.splice(this.#threads.indexOf(t), 1);
      void t.worker.terminate();
    }
  }
}
