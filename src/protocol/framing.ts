// Framing (sidecar/PROTOCOL.md, "Framing"): a u32 little-endian payload length, then exactly that many bytes
// of one MessagePack map. Lengths 0 and over the cap are E_FRAME; the connection then closes.
import os from 'node:os';
import { MAX_IMAGE_SIDE } from '../image/limits.ts';

/** Largest image side an `infer` image may have: the decoder's own limit. */
export { MAX_IMAGE_SIDE };
/** The frame cap follows the image limits: an 8192×8192 RGB u8 image plus 64 KiB for the envelope. */
export const MAX_FRAME_BYTES = MAX_IMAGE_SIDE * MAX_IMAGE_SIDE * 3 + 65536;
export const FRAME_HEADER_BYTES = 4;

if (os.endianness() !== 'LE') {
  throw new Error('src/protocol: f32 tensors travel little-endian and are viewed in place; this host is big-endian');
}

/** The length header of a payload of `payloadBytes`; throws over the cap. */
export function frameHeader(payloadBytes: number): Buffer {
  if (payloadBytes > MAX_FRAME_BYTES) {
    throw new RangeError(`encodeFrame: payload is ${payloadBytes} bytes, over the ${MAX_FRAME_BYTES}-byte cap`);
  }
  const h = Buffer.allocUnsafe(FRAME_HEADER_BYTES);
  h.writeUInt32LE(payloadBytes, 0);
  return h;
}

/**
 * Reassembles frames from socket chunks of any size (a frame may arrive a byte at a time or several per
 * chunk). Hands each complete payload to onPayload; a bad length calls onFrameError once and the reader
 * stops (the caller closes the connection).
 */
export class FrameReader {
  #chunks: Buffer[] = [];
  #buffered = 0;
  #need = -1;
  #failed = false;
  readonly #onPayload: (payload: Buffer) => void;
  readonly #onFrameError: (message: string) => void;
  readonly #maxBytes: number;

  constructor(onPayload: (payload: Buffer) => void, onFrameError: (message: string) => void, maxBytes = MAX_FRAME_BYTES) {
    this.#onPayload = onPayload;
    this.#onFrameError = onFrameError;
    this.#maxBytes = maxBytes;
  }

  push(chunk: Buffer): void {
    if (this.#failed) return;
    this.#chunks.push(chunk);
    this.#buffered += chunk.length;
    for (;;) {
      if (this.#need < 0) {
        if (this.#buffered < FRAME_HEADER_BYTES) return;
        const len = this.#take(FRAME_HEADER_BYTES).readUInt32LE(0);
        if (len === 0 || len > this.#maxBytes) {
          this.#failed = true;
          this.#chunks = [];
          this.#onFrameError(`frame length ${len} is outside 1 to ${this.#maxBytes} bytes`);
          return;
        }
        this.#need = len;
      }
      if (this.#buffered < this.#need) return;
      const payload = this.#take(this.#need);
      this.#need = -1;
      this.#onPayload(payload);
      if (this.#failed) return;
    }
  }

  /** Stops delivering (after a fatal decode error the caller found in a payload). */
  stop(): void {
    this.#failed = true;
    this.#chunks = [];
  }

  #take(n: number): Buffer {
    this.#buffered -= n;
    const first = this.#chunks[0]!;
    if (first.length >= n) {
      const out = first.subarray(0, n);
      if (first.length === n) this.#chunks.shift();
      else this.#chunks[0] = first.subarray(n);
      return out;
    }
    const out = Buffer.allocUnsafe(n);
    let off = 0;
    while (off < n) {
      const c = this.#chunks[0]!;
      const k = Math.min(c.length, n - off);
      c.copy(out, off, 0, k);
      off += k;
      if (k === c.length) this.#chunks.shift();
      else this.#chunks[0] = c.subarray(k);
    }
    return out;
  }
}
