// One connection's shared-memory channel (PROTOCOL.md, "Frames over shared memory"): asks the sidecar for
// slot files once, in the background, on the first image that could use them, and then puts decoded images
// into the slots and hands back references. Until the slots are open, and after anything fails (an older
// sidecar without shm_attach, E_SHM, files it cannot open), images go in the frame: a request never fails for
// want of shared memory.
import type { FrameTarget } from '../image/frame-decode.ts';
import type { WireImageShm, WireMessage } from '../protocol/codec.ts';
import { ShmSlots } from './shm-slots.ts';

/**
 * The decoded-image sizes (bytes) sent through the sidecar's shared-memory slots when it offers them; others
 * go in the frame. RFDETR_SHM=off: none. bench/server (RESULTS.md) measured a 640×480 frame's send + sidecar
 * I/O 1.0–1.4 ms through a slot against 1.8–2.4 ms in the frame. A 4000×3000 one was slower through a slot
 * while sharp's 36 MB buffer was the event loop's garbage (43–46 ms against 28–34, more GC); decoded in a
 * thread into a reused buffer (src/image/pixel-pool.ts) it is faster: send 15–22 ms against 26–53 and the
 * sidecar's CPU 14–17 ms per request against 21–24 (RESULTS.md §7), so by default every size goes through
 * the slots (RFDETR_SHM_MAX_BYTES caps it).
 */
export function shmRange(env: NodeJS.ProcessEnv = process.env): { min: number; max: number } {
  if ((env.RFDETR_SHM ?? '').toLowerCase() === 'off') return { min: Infinity, max: 0 };
  const num = (v: string | undefined, d: number) => {
    const n = Number(v ?? d);
    return Number.isNaN(n) || n < 0 ? d : n;
  };
  return { min: num(env.RFDETR_SHM_MIN_BYTES, 1), max: num(env.RFDETR_SHM_MAX_BYTES, Infinity) };
}

/** An image in a slot: the slot to hold until the reply, and the reference the request carries. */
export interface SlotRef {
  slot: number;
  ref: WireImageShm;
}

export class ShmChannel {
  readonly #attach: () => Promise<WireMessage>;
  readonly #closing: () => boolean;
  readonly #range = shmRange();
  #slots: ShmSlots | undefined;
  #state: 'unknown' | 'attaching' | 'ready' | 'off' = 'unknown';
  #why = '';
  #frames = 0;

  /** `attach` sends shm_attach and resolves with the reply; `closing` says the connection is going away. */
  constructor(attach: () => Promise<WireMessage>, closing: () => boolean) {
    this.#attach = attach;
    this.#closing = closing;
  }

  /** Whether images travel through shared memory on this connection, and why not when they do not. */
  get status(): string {
    return this.#state === 'off' ? `off: ${this.#why}` : this.#state;
  }

  /** How many images this connection sent through shared memory. */
  get frames(): number {
    return this.#frames;
  }

  #inRange(bytes: number): boolean {
    return bytes >= this.#range.min && bytes <= this.#range.max;
  }

  #attachOnce(): void {
    if (this.#state !== 'unknown' || this.#closing()) return;
    this.#state = 'attaching';
    const off = (why: string) => {
      this.#state = 'off';
      this.#why = why;
    };
    this.#attach()
      .then(async (m) => {
        if (m.kind !== 'reply' || !m.shm) return off('the shm_attach reply carried no slots');
        const slots = await ShmSlots.open(m.shm.paths, m.shm.slot_bytes);
        if (this.#closing()) return slots.close();
        this.#slots = slots;
        this.#state = 'ready';
      })
      .catch((e: Error) => off(e.message));
  }

  /**
   * A slot a large decode may write into (src/image/frame-decode.ts), when this connection has shared memory
   * and frames of `bytes` go through it; an image decoded there is then sent by reference without a copy.
   */
  frameTarget(bytes: number): FrameTarget | undefined {
    if (this.#closing() || !this.#inRange(bytes)) return undefined;
    this.#attachOnce();
    return this.#slots?.frameTarget(bytes);
  }

  /** The reference of an image decoded into one of this connection's slots (its pixels never read here). */
  refOf(frame: FrameTarget, width: number, height: number): SlotRef | undefined {
    const r = this.#slots?.ref(frame, width, height);
    if (r) this.#frames++;
    return r;
  }

  /** Copies `rgb` into a free slot when its size goes through shared memory and a slot is free. */
  async put(rgb: Uint8Array, width: number, height: number): Promise<SlotRef | undefined> {
    if (!this.#inRange(rgb.byteLength)) return undefined;
    this.#attachOnce();
    const r = this.#slots && (await this.#slots.put(rgb, width, height));
    if (r) this.#frames++;
    return r;
  }

  /** The request that read `slot` was answered (or given up with the connection). */
  release(slot: number): void {
    this.#slots?.release(slot);
  }

  close(): void {
    this.#slots?.close();
  }
}
