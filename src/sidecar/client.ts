// One connection to a sidecar: waits for its hello, sends requests with ids and per-request deadlines, and
// has ONE close path (#closeWith) that rejects every pending request with the same typed error. After it ran,
// every call fails at once; nothing hangs. Wire shapes stay in this file and src/protocol.
import net from 'node:net';
import { RfdetrError } from '../errors.ts';
import {
  FrameReader, decodePayload, encodeFrameParts, f32Bytes, f32FromBytes, MAX_FRAME_BYTES, MAX_IMAGE_SIDE, PROTOCOL_VERSION,
  PROTOCOL_VERSION_WITHOUT_VARIANT, type WireHello, type WireImage, type WireImageEncoded, type WireImageShm, type WireMessage,
} from '../protocol/codec.ts';
import { WIRE_ERRORS } from '../protocol/error-codes.ts';
import type { FrameTarget } from '../image/frame-decode.ts';
import type { EncodedImage, InferInput, InferResult, SidecarInfo } from './backend.ts';
import { ShmSlots } from './shm-slots.ts';
import { helloTaskError } from '../detect/tasks.ts';

const MAX_ID = 0xffffffff;
/** Bytes read from the socket at a time: an infer reply and its header in one read. */
const READ_BUFFER_BYTES = 256 << 10;

type RequestFields = { image?: WireImage; pixel_values?: Uint8Array; image_shm?: WireImageShm; image_encoded?: WireImageEncoded };
/** The most file bytes one frame carries: the frame cap less the 64 KiB it keeps for the envelope. */
const MAX_ENCODED_BYTES = MAX_FRAME_BYTES - 65536;
const NO_DECODERS: ReadonlySet<string> = new Set();

/** E_USAGE unless both sides are whole numbers from 1 to MAX_IMAGE_SIDE (what the sidecar accepts). */
function checkSides(width: number, height: number): void {
  if (!(Number.isInteger(width) && Number.isInteger(height) && width >= 1 && height >= 1 && width <= MAX_IMAGE_SIDE && height <= MAX_IMAGE_SIDE)) {
    throw new RfdetrError('E_USAGE', `image must be 1 to ${MAX_IMAGE_SIDE} pixels on each side, got ${width}×${height}`);
  }
}

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

/**
 * Whether image files may go to the sidecar to decode (PROTOCOL.md, "Images the sidecar decodes"), when it
 * says it decodes their format. RFDETR_SIDECAR_DECODE=off: never; the server decodes every image itself.
 */
export function sidecarDecodeEnabled(env: NodeJS.ProcessEnv = process.env): boolean {
  return (env.RFDETR_SIDECAR_DECODE ?? '').toLowerCase() !== 'off';
}

interface Pending {
  op: 'infer' | 'ping' | 'shm_attach' | 'decoders';
  resolve: (m: Replied) => void;
  reject: (e: Error) => void;
  timer: NodeJS.Timeout | undefined;
  sentAt: number;
  /** performance.now() when the last byte of the request frame was handed to the kernel. */
  writtenAt: number | undefined;
  /** The caller gave up (deadline/abort); the sidecar may still be working on it. */
  abandoned: boolean;
  /** The shared-memory slot the request's image is in: held until the sidecar answers or the connection closes. */
  slot: number | undefined;
  cleanup: () => void;
}

/** A reply and when it was read; `writtenAt` is when the request frame left (undefined if not yet told). */
interface Replied {
  message: WireMessage;
  writtenAt: number | undefined;
  readAt: number;
}

export interface ConnectOptions {
  /** How long to wait for the connection and the hello. */
  helloTimeoutMs: number;
  /**
   * Called once when the socket closes or the peer breaks the protocol, before pending requests are rejected.
   * The owner returns the error to reject them with (e.g. with the process's exit code and stderr tail).
   */
  explainClose?: (cause: RfdetrError) => Promise<RfdetrError> | RfdetrError;
  /** Called after the close path ran. */
  onClosed?: (err: RfdetrError) => void;
}

export function infoFromHello(h: WireHello): SidecarInfo {
  const [c, hgt, w] = h.input_shape;
  return {
    protocolVersion: h.protocol_version,
    sidecarVersion: h.sidecar_version,
    engine: h.engine,
    device: h.device,
    inputShape: [c ?? 0, hgt ?? 0, w ?? 0],
    numQueries: h.num_queries,
    numClasses: h.num_classes,
    labels: h.labels,
    variant: h.variant ?? null,
    // A version-2/3 sidecar serves detection with the two outputs its reply carries as top-level keys.
    task: 'detect',
    outputs: [
      { name: 'logits', dtype: 'f32', shape: [h.num_queries, h.num_classes] },
      { name: 'pred_boxes', dtype: 'f32', shape: [h.num_queries, 4] },
    ],
    precision: null,
    precisions: null,
    hostCores: null,
  };
}

export class SidecarConnection {
  readonly info: SidecarInfo;
  readonly #socket: net.Socket;
  readonly #pending = new Map<number, Pending>();
  readonly #opts: ConnectOptions;
  #nextId = 1;
  #closeError: RfdetrError | undefined;
  #closing = false;
  #shmRange = shmRange();
  #shm: ShmSlots | undefined;
  #shmState: 'unknown' | 'attaching' | 'ready' | 'off' = 'unknown';
  #shmWhy = '';
  #shmFrames = 0;
  #decodeOn = sidecarDecodeEnabled();
  /** The formats the sidecar said it decodes; undefined until it has answered (none after any failure). */
  #decoders: ReadonlySet<string> | undefined;
  #decodersAsked: Promise<void> | undefined;

  private constructor(socket: net.Socket, info: SidecarInfo, opts: ConnectOptions) {
    this.#socket = socket;
    this.info = info;
    this.#opts = opts;
  }

  /** Connects, reads the hello and checks the protocol version. Rejects with E_PROTOCOL / E_VERSION_MISMATCH / E_SIDECAR_EXITED. */
  static connect(socketPath: string, opts: ConnectOptions): Promise<SidecarConnection> {
    return new Promise((resolve, reject) => {
      // Frames are read into one reused buffer, READ_BUFFER_BYTES at a time, and copied out: an infer reply
      // (114 KB at 300×91) then arrives in one read, not in the two 64 KB reads of a plain socket an event-loop
      // turn apart.
      const readBuf = Buffer.allocUnsafeSlow(READ_BUFFER_BYTES);
      const socket = net.createConnection({
        path: socketPath,
        onread: {
          buffer: readBuf,
          callback: (n: number, buf: Uint8Array) => {
            const chunk = Buffer.allocUnsafe(n);
            chunk.set(buf.subarray(0, n));
            reader.push(chunk);
            return true;
          },
        },
      });
      let conn: SidecarConnection | undefined;
      let settled = false;
      const fail = (err: RfdetrError) => {
        if (conn) {
          conn.#fail(err);
          return;
        }
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        socket.destroy();
        reject(err);
      };
      const timer = setTimeout(() => {
        fail(new RfdetrError('E_PROTOCOL', `no hello from the sidecar on ${socketPath} within ${opts.helloTimeoutMs} ms; is it a sidecar, and is it still starting?`));
      }, opts.helloTimeoutMs);
      const reader = new FrameReader(
        (payload) => {
          const readAt = performance.now();
          const r = decodePayload(payload);
          if (!r.ok) {
            reader.stop();
            fail(new RfdetrError('E_PROTOCOL', `sidecar sent a bad frame (${r.code}: ${r.message}); closing the connection`));
            return;
          }
          if (conn) {
            conn.#onMessage(r.message, readAt);
            return;
          }
          const m = r.message;
          if (m.kind !== 'hello') {
            reader.stop();
            fail(new RfdetrError('E_PROTOCOL', `the sidecar's first frame must be its hello, got a ${m.kind} with id ${m.id}`));
            return;
          }
          if (m.protocol_version !== PROTOCOL_VERSION && m.protocol_version !== PROTOCOL_VERSION_WITHOUT_VARIANT) {
            reader.stop();
            fail(new RfdetrError('E_VERSION_MISMATCH',
              `sidecar ${m.sidecar_version} speaks protocol version ${m.protocol_version}, this client speaks versions ${PROTOCOL_VERSION} and ${PROTOCOL_VERSION_WITHOUT_VARIANT}; ` +
              'install matching versions (rebuild the sidecar with npm install)',
              { sidecarProtocol: m.protocol_version, clientProtocol: PROTOCOL_VERSION, sidecarVersion: m.sidecar_version }));
            return;
          }
          const [c, h, w] = m.input_shape;
          if (c !== 3 || h !== w || !(h! >= 32 && h! <= 4096)) {
            reader.stop();
            fail(new RfdetrError('E_PROTOCOL', `sidecar input shape is [${m.input_shape.join(',')}]; this client expects [3,S,S] with 32 ≤ S ≤ 4096`));
            return;
          }
          const info = infoFromHello(m);
          const taskWhy = helloTaskError(info);
          if (taskWhy !== undefined) {
            reader.stop();
            fail(new RfdetrError('E_PROTOCOL', taskWhy, { task: info.task }));
            return;
          }
          settled = true;
          clearTimeout(timer);
          conn = new SidecarConnection(socket, info, opts);
          resolve(conn);
        },
        (message) => fail(new RfdetrError('E_PROTOCOL', `sidecar sent a bad frame (${message}); closing the connection`)),
      );
      socket.on('error', (e: NodeJS.ErrnoException) => {
        fail(new RfdetrError('E_SIDECAR_EXITED', `sidecar socket ${socketPath}: ${e.code ?? ''} ${e.message}`, { socketPath, errno: e.code }));
      });
      socket.on('close', () => {
        fail(new RfdetrError('E_SIDECAR_EXITED', `the sidecar closed the connection on ${socketPath}`, { socketPath }));
      });
    });
  }

  get closed(): boolean {
    return this.#closing;
  }

  /** Requests the sidecar is working on, including ones whose caller gave up. */
  get inFlight(): number {
    return this.#pending.size;
  }

  /** Age in ms of the oldest infer the sidecar has not answered (0 when none): a stuck forward shows here. */
  oldestInferMs(now = performance.now()): number {
    let oldest = 0;
    for (const p of this.#pending.values()) {
      if (p.op === 'infer') oldest = Math.max(oldest, now - p.sentAt);
    }
    return oldest;
  }

  /** Sends a decoded RGB image (resized by the sidecar) or ready pixel_values; checks sizes before sending. */
  /** Whether images travel through shared memory on this connection, and why not when they do not. */
  get shmStatus(): string {
    return this.#shmState === 'off' ? `off: ${this.#shmWhy}` : this.#shmState;
  }

  /** How many images this connection sent through shared memory. */
  get framesViaShm(): number {
    return this.#shmFrames;
  }

  /**
   * Asks the sidecar for slot files once, in the background: the frames sent meanwhile go through the
   * socket. Any failure (an older sidecar without the op, E_SHM, files it cannot open) leaves it off.
   */
  #attachShm(): void {
    this.#shmState = 'attaching';
    const off = (why: string) => {
      this.#shmState = 'off';
      this.#shmWhy = why;
    };
    this.#request('shm_attach', {}, this.#opts.helloTimeoutMs)
      .then(async ({ message: m }) => {
        if (m.kind !== 'reply' || !m.shm) return off('the shm_attach reply carried no slots');
        const slots = await ShmSlots.open(m.shm.paths, m.shm.slot_bytes);
        if (this.#closing) return slots.close();
        this.#shm = slots;
        this.#shmState = 'ready';
      })
      .catch((e: Error) => off(e.message));
  }

  /**
   * A slot a large decode may write into (src/image/frame-decode.ts), when this connection has shared memory
   * and frames of `bytes` go through it; an image decoded there is then sent by reference without a copy.
   */
  frameTarget(bytes: number): FrameTarget | undefined {
    if (this.#closing || bytes < this.#shmRange.min || bytes > this.#shmRange.max) return undefined;
    if (this.#shmState === 'unknown') this.#attachShm();
    return this.#shm?.frameTarget(bytes);
  }

  /**
   * Whether an image file of `format` may be sent as `{ encoded }`: the sidecar said it decodes it. The first
   * call asks (`decoders`) in the background and answers false, as every call does until the reply is in;
   * an older sidecar (E_UNKNOWN_OP) or any failure of the question means none for this connection, and
   * RFDETR_SIDECAR_DECODE=off means none without asking.
   */
  decodes(format: 'jpeg' | 'png'): boolean {
    if (!this.#decodeOn || this.#closing) return false;
    if (!this.#decodersAsked) void this.decodersKnown();
    return this.#decoders?.has(format) ?? false;
  }

  /** Resolves once decodes() has its answer (asking now if nobody has yet); never rejects. */
  decodersKnown(): Promise<void> {
    if (!this.#decodeOn) {
      this.#decoders = NO_DECODERS;
      return Promise.resolve();
    }
    this.#decodersAsked ??= this.#request('decoders', {}, this.#opts.helloTimeoutMs).then(
      ({ message: m }) => {
        this.#decoders = m.kind === 'reply' && m.decoders ? new Set(m.decoders) : NO_DECODERS;
      },
      () => {
        this.#decoders = NO_DECODERS;
      },
    );
    return this.#decodersAsked;
  }

  /** Why decodes(format) is false, for the error that refuses such a file. */
  #noDecodeWhy(): string {
    if (!this.#decodeOn) return 'RFDETR_SIDECAR_DECODE=off';
    if (!this.#decoders) return 'it has not yet said which formats it decodes';
    return `it decodes ${this.#decoders.size ? [...this.#decoders].join(', ') : 'none'}`;
  }

  /** An image file for the sidecar to decode; E_SIDECAR_DECLINED when it does not take it (then decode it here). */
  async #inferEncoded(e: EncodedImage, opts: { deadlineMs?: number; signal?: AbortSignal }): Promise<InferResult> {
    const { format, width, height, bytes } = e;
    if (format !== 'jpeg' && format !== 'png') {
      throw new RfdetrError('E_USAGE', `an encoded image's format must be 'jpeg' or 'png', got '${String(format)}'`);
    }
    checkSides(width, height);
    if (bytes.byteLength === 0) throw new RfdetrError('E_USAGE', `the ${format} file is empty; send the whole file`);
    if (!this.decodes(format)) {
      throw new RfdetrError('E_SIDECAR_DECLINED', `this sidecar does not decode ${format} files (${this.#noDecodeWhy()}); decode the image and send it as { image }`, { format });
    }
    if (bytes.byteLength > MAX_ENCODED_BYTES) {
      throw new RfdetrError('E_SIDECAR_DECLINED', `the ${format} file is ${bytes.byteLength} bytes, over the ${MAX_ENCODED_BYTES} one frame carries; decode the image and send it as { image }`, { format });
    }
    const t0 = performance.now();
    const { message: reply, writtenAt, readAt } = await this.#request('infer', { image_encoded: { format, width, height, bytes } }, opts.deadlineMs, opts.signal);
    return this.#result(reply, writtenAt, readAt, performance.now() - t0, true);
  }

  async infer(input: InferInput, opts: { deadlineMs?: number; signal?: AbortSignal } = {}): Promise<InferResult> {
    if ('encoded' in input) return this.#inferEncoded(input.encoded, opts);
    const fields: RequestFields = {};
    let slot: number | undefined;
    if ('image' in input) {
      const { width, height, frame } = input.image;
      checkSides(width, height);
      // Decoded into one of this connection's slots: sent by reference, its pixels never read here.
      const framed = frame && this.#shm?.ref(frame, width, height);
      if (framed) {
        const t0 = performance.now();
        this.#shmFrames++;
        const { message: reply, writtenAt, readAt } = await this.#request('infer', { image_shm: framed.ref }, opts.deadlineMs, opts.signal, framed.slot);
        return this.#result(reply, writtenAt, readAt, performance.now() - t0);
      }
      const data = input.image.data;
      if (data.length !== width * height * 3) {
        throw new RfdetrError('E_USAGE', `image data must hold ${width}×${height}×3 = ${width * height * 3} bytes (RGB u8), got ${data.length}`);
      }
      fields.image = { width, height, rgb: data };
    } else {
      const [c, h, w] = this.info.inputShape;
      const want = c * h * w;
      if (input.pixelValues.length !== want) {
        throw new RfdetrError('E_USAGE', `pixel_values must hold ${c}×${h}×${w} = ${want} floats, got ${input.pixelValues.length}`);
      }
      fields.pixel_values = f32Bytes(input.pixelValues);
    }
    const t0 = performance.now();
    const n = fields.image?.rgb.byteLength ?? 0;
    if (fields.image && n >= this.#shmRange.min && n <= this.#shmRange.max) {
      if (this.#shmState === 'unknown' && !this.#closing) this.#attachShm();
      const put = this.#shm && (await this.#shm.put(fields.image.rgb, fields.image.width, fields.image.height));
      if (put) {
        slot = put.slot;
        fields.image_shm = put.ref;
        delete fields.image;
        this.#shmFrames++;
      }
    }
    const { message: reply, writtenAt, readAt } = await this.#request('infer', fields, opts.deadlineMs, opts.signal, slot);
    return this.#result(reply, writtenAt, readAt, performance.now() - t0);
  }

  /** An infer reply checked against the hello and turned into the domain result. */
  #result(reply: WireMessage, writtenAt: number | undefined, readAt: number, rtt: number, encoded = false): InferResult {
    if (reply.kind !== 'reply' || !reply.logits || !reply.pred_boxes || reply.forward_ms === undefined || reply.preprocess_ms === undefined ||
      (encoded && reply.decode_ms === undefined)) {
      const err = new RfdetrError('E_PROTOCOL', `infer reply lacks logits, pred_boxes, preprocess_ms or forward_ms${encoded ? ', or decode_ms (the request was image_encoded)' : ''}`);
      this.#fail(err);
      throw err;
    }
    const { numQueries, numClasses } = this.info;
    if (reply.logits.length !== numQueries * numClasses * 4 || reply.pred_boxes.length !== numQueries * 16) {
      const err = new RfdetrError('E_PROTOCOL',
        `infer reply sizes (logits ${reply.logits.length} B, pred_boxes ${reply.pred_boxes.length} B) do not match the hello ` +
        `(${numQueries}×${numClasses} and ${numQueries}×4 f32)`);
      this.#fail(err);
      throw err;
    }
    const decodeMs = reply.decode_ms;
    return {
      outputs: { logits: f32FromBytes(reply.logits), pred_boxes: f32FromBytes(reply.pred_boxes) },
      ...(decodeMs === undefined ? {} : { decodeMs }),
      preprocessMs: reply.preprocess_ms,
      forwardMs: reply.forward_ms,
      transferMs: Math.max(0, rtt - reply.forward_ms - reply.preprocess_ms - (decodeMs ?? 0)),
      frameWrittenAt: Math.min(writtenAt ?? readAt, readAt),
      replyReadAt: readAt,
    };
  }

  async ping(timeoutMs: number): Promise<void> {
    await this.#request('ping', {}, timeoutMs);
  }

  /** The close path, from outside: rejects every pending request with `err` and closes the socket. */
  close(err: RfdetrError = new RfdetrError('E_CLOSED', 'the sidecar connection was closed')): void {
    this.#closeWith(err);
  }

  #request(op: Pending['op'], fields: RequestFields, deadlineMs?: number, signal?: AbortSignal, slot?: number): Promise<Replied> {
    const refuse = (e: RfdetrError) => {
      if (slot !== undefined) this.#shm?.release(slot);
      return Promise.reject(e);
    };
    if (this.#closeError) return refuse(this.#closeError);
    if (this.#closing) return refuse(new RfdetrError('E_SIDECAR_EXITED', 'the sidecar connection is closing'));
    if (signal?.aborted) return refuse(new RfdetrError('E_ABORTED', `${op} aborted before it was sent`));
    const id = this.#nextId;
    this.#nextId = this.#nextId >= MAX_ID ? 1 : this.#nextId + 1;
    const frame = encodeFrameParts({ kind: 'request', id, op, ...fields });
    return new Promise<Replied>((resolve, reject) => {
      const p: Pending = {
        op, resolve, reject, timer: undefined, sentAt: performance.now(), writtenAt: undefined, abandoned: false, slot,
        cleanup: () => {
          if (p.timer) clearTimeout(p.timer);
          signal?.removeEventListener('abort', onAbort);
        },
      };
      const giveUp = (err: RfdetrError) => {
        if (p.abandoned) return;
        p.abandoned = true;
        p.cleanup();
        reject(err);
      };
      const onAbort = () => giveUp(new RfdetrError('E_ABORTED', `${op} request ${id} aborted by the caller`));
      if (deadlineMs !== undefined && Number.isFinite(deadlineMs)) {
        p.timer = setTimeout(() => giveUp(new RfdetrError('E_DEADLINE',
          `the sidecar did not answer ${op} request ${id} within ${Math.round(deadlineMs)} ms`, { op, deadlineMs })), Math.max(0, deadlineMs));
      }
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#pending.set(id, p);
      this.#socket.cork();
      for (let i = 0; i < frame.length - 1; i++) this.#socket.write(frame[i]!);
      this.#socket.write(frame[frame.length - 1]!, () => {
        p.writtenAt = performance.now();
      });
      this.#socket.uncork();
    });
  }

  #onMessage(m: WireMessage, readAt: number): void {
    if (m.kind !== 'reply' && m.kind !== 'error') {
      this.#fail(new RfdetrError('E_PROTOCOL', `sidecar sent a ${m.kind} frame after its hello`));
      return;
    }
    const p = this.#pending.get(m.id);
    if (!p) {
      if (m.id === 0 && m.kind === 'error') {
        this.#fail(new RfdetrError('E_PROTOCOL', `sidecar refused a frame: ${m.error.code}: ${m.error.message}`));
      } else {
        this.#fail(new RfdetrError('E_PROTOCOL', `sidecar answered request ${m.id}, which is not pending`));
      }
      return;
    }
    this.#pending.delete(m.id);
    p.cleanup();
    if (p.slot !== undefined) this.#shm?.release(p.slot);
    if (p.abandoned) return;
    if (m.kind === 'error') {
      const domain = WIRE_ERRORS[m.error.code].domain;
      p.reject(new RfdetrError(domain, `sidecar ${p.op} failed: ${m.error.code}: ${m.error.message}`, { wireCode: m.error.code }));
      if (WIRE_ERRORS[m.error.code].closesConnection) {
        this.#fail(new RfdetrError('E_PROTOCOL', `sidecar closed the connection: ${m.error.message}`));
      }
      return;
    }
    p.resolve({ message: m, writtenAt: p.writtenAt, readAt });
  }

  #fail(cause: RfdetrError): void {
    if (this.#closing) return;
    this.#closing = true;
    this.#socket.destroy();
    const explain = this.#opts.explainClose;
    if (!explain) {
      this.#closeWith(cause);
      return;
    }
    Promise.resolve()
      .then(() => explain(cause))
      .then((e) => this.#closeWith(e), () => this.#closeWith(cause));
  }

  #closeWith(err: RfdetrError): void {
    if (this.#closeError) return;
    this.#closing = true;
    this.#closeError = err;
    this.#socket.destroy();
    for (const p of this.#pending.values()) {
      p.cleanup();
      if (p.slot !== undefined) this.#shm?.release(p.slot);
      if (!p.abandoned) p.reject(err);
    }
    this.#pending.clear();
    this.#shm?.close();
    this.#opts.onClosed?.(err);
  }
}
