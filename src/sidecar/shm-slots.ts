// The client's half of frames over shared memory (sidecar/PROTOCOL.md, "Frames over shared memory"): the
// slot files one sidecar connection was given by shm_attach, opened for writing, each holding at most one
// frame in flight. A frame goes into a free slot (up to 1 MiB with a synchronous write on the event loop,
// larger ones with asynchronous writes the libuv pool copies) and the request carries only its reference.
// Anything that keeps a frame out of a slot (no free slot, a write that fails or comes up short, e.g. ENOSPC
// on a small /dev/shm) makes the caller send that frame through the socket instead; a request never fails
// for want of shared memory.
//
// A large JPEG can also be decoded straight into a slot (src/image/frame-decode.ts): frameTarget() lends a slot
// by a `.v` path (a symlink, in a private directory, to /proc/self/fd/N: libvips names its format by the file
// name and reopens the file by path, and the slot file is unlinked once used), and ref() turns that decoded
// image into a reference without a copy. A slot is held by an image decoded into it until its release() and by
// each request in flight that reads it until its reply; it is written again only when nothing holds it.
import fs from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { WireImageShm } from '../protocol/codec.ts';
import { V_HEADER_BYTES, type FrameTarget } from '../image/frame-decode.ts';

/** Frames from this size on are written by two pool threads (a 4000×3000 frame is 36 MB). */
const PARALLEL_WRITE_BYTES = 8 << 20;
/**
 * Frames up to this size are written synchronously: a 640×480 frame (921,600 bytes) takes 0.07 ms to copy
 * into the tmpfs page cache, where the pool's write took 0.10 ms alone and 0.44 ms p50 inside the server at
 * load 7 (the hop to a pool thread and back, both of which wait for a core on a busy host). The loop is held
 * for at most ~0.1 ms, less than the response's JSON.stringify.
 */
const SYNC_WRITE_BYTES = 1 << 20;

/** The frame-link directories' names: rfdetr-frames-<pid>-XXXXXX in the temporary directory. */
const LINK_DIR_PREFIX = 'rfdetr-frames-';
let swept = false;

/**
 * Removes, once per process, the frame-link directories of servers that are gone (killed before their
 * connections closed), as the sidecar removes the slot directories of dead sidecars.
 */
export function sweepStaleLinkDirs(dir = os.tmpdir(), force = false): void {
  if (swept && !force) return;
  swept = true;
  let names: string[];
  try {
    names = fs.readdirSync(dir);
  } catch {
    return;
  }
  for (const name of names) {
    const m = /^rfdetr-frames-(\d+)-/.exec(name);
    if (!m || Number(m[1]) === process.pid) continue;
    try {
      process.kill(Number(m[1]), 0);
      continue; // alive (or another user's: EPERM below)
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ESRCH') continue;
    }
    try {
      const full = path.join(dir, name);
      if (fs.lstatSync(full).isDirectory()) fs.rmSync(full, { recursive: true, force: true });
    } catch {
      // Another user's, or gone already.
    }
  }
}

/** A slot lent to a decode (frameTarget()); the connection sends it by reference when it is this one's. */
class SlotFrame implements FrameTarget {
  readonly path: string;
  readonly owner: ShmSlots;
  readonly slot: number;
  #bytes = 0;
  #released = false;
  readonly #give: () => void;
  readonly #fd: () => number;

  constructor(owner: ShmSlots, slot: number, linkPath: string, fd: () => number, give: () => void) {
    this.owner = owner;
    this.slot = slot;
    this.path = linkPath;
    this.#fd = fd;
    this.#give = give;
  }

  /** The pixels' bytes once check() accepted the file, else 0. */
  get bytes(): number {
    return this.#released ? 0 : this.#bytes;
  }

  check(width: number, height: number): boolean {
    const n = width * height * 3;
    const h = Buffer.alloc(V_HEADER_BYTES);
    try {
      if (fs.readSync(this.#fd(), h, 0, V_HEADER_BYTES, 0) !== V_HEADER_BYTES || fs.fstatSync(this.#fd()).size < V_HEADER_BYTES + n) return false;
    } catch {
      return false;
    }
    // libvips' header, little-endian on the hosts we build for: magic, width, height, bands, (bits), band format
    // 0 (uchar), coding 0 (none).
    const ok = h.readUInt32LE(0) === 0x08f2a6b6 && h.readUInt32LE(4) === width && h.readUInt32LE(8) === height &&
      h.readUInt32LE(12) === 3 && h.readUInt32LE(20) === 0 && h.readUInt32LE(24) === 0;
    if (ok) this.#bytes = n;
    return ok;
  }

  read(): Uint8Array {
    if (this.#released || this.#bytes === 0) throw new Error('read() of a frame that holds no checked pixels');
    const out = new Uint8Array(this.#bytes);
    let got = 0;
    while (got < out.length) {
      const k = fs.readSync(this.#fd(), out, got, out.length - got, V_HEADER_BYTES + got);
      if (k === 0) throw new Error(`the slot file ended after ${got} of ${out.length} pixel bytes`);
      got += k;
    }
    return out;
  }

  release(): void {
    if (this.#released) return;
    this.#released = true;
    this.#give();
  }
}

export class ShmSlots {
  readonly #handles: FileHandle[];
  readonly #names: string[];
  /** Per slot: the image decoded into it (until its release) and each request in flight that reads it. */
  readonly #holds: number[];
  readonly #slotBytes: number;
  /** The `.v` symlinks to the slot files for frameTarget(), and their directory; none when it could not be made. */
  readonly #links: string[];
  readonly #linkDir: string | undefined;
  /** Frames of at least this many bytes are not tried again after one failed to fit (the tmpfs is full). */
  #failBytes = Infinity;
  #closed = false;

  private constructor(handles: FileHandle[], paths: string[], slotBytes: number) {
    this.#handles = handles;
    this.#names = paths.map((p) => path.basename(p));
    this.#holds = handles.map(() => 0);
    this.#slotBytes = slotBytes;
    let dir: string | undefined;
    try {
      sweepStaleLinkDirs();
      dir = fs.mkdtempSync(path.join(os.tmpdir(), `${LINK_DIR_PREFIX}${process.pid}-`));
      this.#links = handles.map((h, i) => {
        const link = path.join(dir!, `slot-${i}.v`);
        fs.symlinkSync(`/proc/self/fd/${h.fd}`, link);
        return link;
      });
    } catch {
      // No private directory or no symlinks: large decodes are copied into the slots instead.
      if (dir) fs.rmSync(dir, { recursive: true, force: true });
      dir = undefined;
      this.#links = [];
    }
    this.#linkDir = dir;
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
   * Lends a free slot for a decode of `bytes` (frame-decode.ts), or undefined. One slot is always left free for
   * the frames that are copied (a crowd's decodes do not take the slots their forwards need).
   */
  frameTarget(bytes: number): FrameTarget | undefined {
    if (this.#closed || this.#links.length === 0 || bytes > this.#slotBytes || bytes >= this.#failBytes) return undefined;
    if (this.#holds.filter((n) => n === 0).length < 2) return undefined;
    const slot = this.#holds.indexOf(0);
    const fd = this.#handles[slot]!.fd;
    try {
      // Room on the tmpfs (the file's own pages are freed when libvips truncates it): a write that would fail
      // on a small /dev/shm is not tried, since a failed frame costs the image a second decode.
      const fsStat = fs.statfsSync(this.#links[slot]!);
      if (fsStat.bavail * fsStat.bsize + fs.fstatSync(fd).blocks * 512 < bytes + (1 << 20)) return undefined;
    } catch {
      return undefined;
    }
    this.#holds[slot] = 1;
    return new SlotFrame(this, slot, this.#links[slot]!, () => this.#handles[slot]!.fd, () => this.release(slot));
  }

  /**
   * The reference for an image decoded into one of these slots (its frame, checked and not released), holding
   * the slot until release(); undefined for any other frame (it is then copied like any image).
   */
  ref(frame: FrameTarget, width: number, height: number): { slot: number; ref: WireImageShm } | undefined {
    if (!(frame instanceof SlotFrame) || frame.owner !== this || this.#closed) return undefined;
    const n = frame.bytes;
    if (n === 0 || n !== width * height * 3) return undefined;
    this.#holds[frame.slot]!++;
    return { slot: frame.slot, ref: { name: this.#names[frame.slot]!, offset: V_HEADER_BYTES, length: n, width, height } };
  }

  /**
   * Writes `data` into a free slot and returns the reference to send, holding the slot until release();
   * undefined when the frame must go through the socket (no free slot, too large, or the write failed).
   */
  async put(data: Uint8Array, width: number, height: number): Promise<{ slot: number; ref: WireImageShm } | undefined> {
    const n = data.byteLength;
    if (this.#closed || n > this.#slotBytes || n >= this.#failBytes) return undefined;
    const slot = this.#holds.indexOf(0);
    if (slot < 0) return undefined;
    this.#holds[slot] = 1;
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
    this.release(slot);
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

  /** The sidecar answered the request that used `slot`, or the image decoded into it was released. */
  release(slot: number): void {
    if (this.#holds[slot]! > 0) this.#holds[slot]!--;
    if (this.#closed && this.#holds[slot] === 0) void this.#handles[slot]!.close().catch(() => {});
  }

  /** Slots held (for tests). */
  get held(): number {
    return this.#holds.filter((n) => n > 0).length;
  }

  /** Closes the slot files (one an image still holds, once it is released: it may still read its pixels back). */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#linkDir) fs.rmSync(this.#linkDir, { recursive: true, force: true });
    this.#handles.forEach((h, i) => {
      if (this.#holds[i] === 0) void h.close().catch(() => {});
    });
  }
}
