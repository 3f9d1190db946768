// The client's half of frames over shared memory (sidecar/PROTOCOL.md, "Frames over shared memory"): the
// slot files one sidecar connection was given by shm_attach, opened for writing, each holding at most one
// frame in flight. A frame goes into a free slot (up to 1 MiB with a synchronous write on the event loop,
// larger ones with asynchronous writes the libuv pool copies) and the request carries only its reference.
// Anything that keeps a frame out of a slot (no free slot, a write that fails or comes up short, e.g. ENOSPC
// on a small /dev/shm) makes the caller send that frame through the socket instead; a request never fails
// for want of shared memory.
import fs from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import type { WireImageShm } from '../protocol/codec.ts';

/** Frames from this size on are written by two pool threads (a 4000×3000 frame is 36 MB). */
const PARALLEL_WRITE_BYTES = 8 << 20;
/**
 * Frames up to this size are written synchronously: a 640×480 frame (921,600 bytes) takes 0.07 ms to copy
 * into the tmpfs page cache, where the pool's write took 0.10 ms alone and 0.44 ms p50 inside the server at
 * load 7 (the hop to a pool thread and back, both of which wait for a core on a busy host). The loop is held
 * for at most ~0.1 ms, less than the response's JSON.stringify.
 */
const SYNC_WRITE_BYTES = 1 << 20;

export class ShmSlots {
  readonly #handles: FileHandle[];
  readonly #names: string[];
  readonly #busy: boolean[];
  readonly #slotBytes: number;
  /** Frames of at least this many bytes are not tried again after one failed to fit (the tmpfs is full). */
  #failBytes = Infinity;
  #closed = false;

  private constructor(handles: FileHandle[], paths: string[], slotBytes: number) {
    this.#handles = handles;
    this.#names = paths.map((p) => path.basename(p));
    this.#busy = handles.map(() => false);
    this.#slotBytes = slotBytes;
  }

  /** Opens every slot file for writing (all of them before the first reference: the sidecar then unlinks them). */
  static async open(paths: string[], slotBytes: number): Promise<ShmSlots> {
    if (paths.length === 0) throw new Error('shm_attach returned no slot files');
    const handles: FileHandle[] = [];
    try {
      for (const p of paths) handles.push(await open(p, 'r+'));
    } catch (e) {
      await Promise.all(handles.map((h) => h.close().catch(() => {})));
      throw e;
    }
    return new ShmSlots(handles, paths, slotBytes);
  }

  /**
   * Writes `data` into a free slot and returns the reference to send, holding the slot until release();
   * undefined when the frame must go through the socket (no free slot, too large, or the write failed).
   */
  async put(data: Uint8Array, width: number, height: number): Promise<{ slot: number; ref: WireImageShm } | undefined> {
    const n = data.byteLength;
    if (this.#closed || n > this.#slotBytes || n >= this.#failBytes) return undefined;
    const slot = this.#busy.indexOf(false);
    if (slot < 0) return undefined;
    this.#busy[slot] = true;
    try {
      const bytesWritten = await this.#write(this.#handles[slot]!, data);
      if (bytesWritten === n && !this.#closed) {
        return { slot, ref: { name: this.#names[slot]!, offset: 0, length: n, width, height } };
      }
      this.#failBytes = Math.min(this.#failBytes, n);
    } catch {
      // ENOSPC, EIO, a closed handle: this frame goes through the socket; smaller ones may still fit.
      this.#failBytes = Math.min(this.#failBytes, n);
    }
    this.#busy[slot] = false;
    return undefined;
  }

  /**
   * Writes `data` at offset 0: a small frame at once (SYNC_WRITE_BYTES). A large frame is written as two
   * halves by two pool threads at once: a tmpfs write copies at ~2 GB/s per thread here (36 MB: 15 ms), and
   * the second core is usually free while the event loop waits for it.
   */
  async #write(h: FileHandle, data: Uint8Array): Promise<number> {
    const n = data.byteLength;
    if (n <= SYNC_WRITE_BYTES) return fs.writeSync(h.fd, data, 0, n, 0);
    const w = (off: number, len: number) => new Promise<number>((resolve, reject) => {
      fs.write(h.fd, data, off, len, off, (e, k) => (e ? reject(e) : resolve(k)));
    });
    if (n < PARALLEL_WRITE_BYTES) return w(0, n);
    const half = Math.floor(n / 2 / 4096) * 4096;
    const [a, b] = await Promise.all([w(0, half), w(half, n - half)]);
    return a === half ? a + b : a;
  }

  /** The sidecar answered the request that used `slot`: its bytes may be overwritten. */
  release(slot: number): void {
    this.#busy[slot] = false;
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const h of this.#handles) void h.close().catch(() => {});
  }
}
