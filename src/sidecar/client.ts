// One connection to a sidecar: waits for its hello, sends requests with ids and per-request deadlines, and
// has ONE close path (#closeWith) that rejects every pending request with the same typed error. After it ran,
// every call fails at once; nothing hangs. Reaching the hello is dial.ts's, what it says hello.ts's, the shared-memory channel
// shm-channel.ts's, the decoder capabilities decoder-caps.ts's and the reply check infer-reply.ts's; wire
// shapes stay in these files and src/protocol.
import type net from 'node:net';
import { RfdetrError } from '../errors.ts';
import { encodeFrameParts, type WireMessage } from '../protocol/codec.ts';
import { WIRE_ERRORS } from '../protocol/error-codes.ts';
import type { FrameTarget } from '../image/frame-decode.ts';
import type { InferInput, InferResult, RowSelect, SidecarInfo } from './backend.ts';
import { DecoderCaps } from './decoder-caps.ts';
import { dialSidecar } from './dial.ts';
import { inferResultOf, type ReplyTiming } from './infer-reply.ts';
import { checkSides, encodedFields, imageFields, pixelFields, selectFields, type RequestFields } from './infer-request.ts';
import { ShmChannel } from './shm-channel.ts';

export { shmRange } from './shm-channel.ts';
export { sidecarDecodeEnabled } from './decoder-caps.ts';
export { infoFromHello } from './hello.ts';

const MAX_ID = 0xffffffff;

interface Pending {
  op: 'infer' | 'ping' | 'shm_attach' | 'decoders';
  resolve: (m: Replied) => void;
  reject: (e: Error) => void;
  timer: NodeJS.Timeout | undefined;
  /** Set when the deadline passed: the give-up, one loop turn later (after the socket was read). */
  judge: NodeJS.Immediate | undefined;
  sentAt: number;
  /** performance.now() when the last byte of the request frame was handed to the kernel. */
  writtenAt: number | undefined;
  /** The caller gave up (deadline/abort); the sidecar may still be working on it. */
  abandoned: boolean;
  /** The shared-memory slot the request's image is in: held until the sidecar answers or the connection closes. */
  slot: number | undefined;
  cleanup: () => void;
}

/** Where this connection's writes stood at a moment (SidecarConnection.writeMark()). */
export interface WriteMark {
  at: number;
  /** Bytes libuv held for the kernel then. */
  queued: number;
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

export class SidecarConnection {
  readonly info: SidecarInfo;
  readonly #socket: net.Socket;
  readonly #pending = new Map<number, Pending>();
  readonly #opts: ConnectOptions;
  #nextId = 1;
  #closeError: RfdetrError | undefined;
  #closing = false;
  /** performance.now() when the last frame from the sidecar was read (-Infinity before the first after the hello). */
  #lastReadAt = -Infinity;
  /** performance.now() when the last request frame was handed whole to the kernel. */
  #lastWrittenAt = -Infinity;
  readonly #shm: ShmChannel;
  readonly #decoders: DecoderCaps;

  private constructor(socket: net.Socket, info: SidecarInfo, opts: ConnectOptions) {
    this.#socket = socket;
    this.info = info;
    this.#opts = opts;
    const closing = () => this.#closing;
    const ask = (op: 'shm_attach' | 'decoders') => () => this.#request(op, {}, opts.helloTimeoutMs).then((r) => r.message);
    this.#shm = new ShmChannel(ask('shm_attach'), closing);
    this.#decoders = new DecoderCaps(ask('decoders'), closing);
  }

  /** Connects, reads the hello and checks it (dial.ts, hello.ts). Rejects with E_PROTOCOL / E_VERSION_MISMATCH / E_SIDECAR_EXITED. */
  static async connect(socketPath: string, opts: ConnectOptions): Promise<SidecarConnection> {
    const { conn } = await dialSidecar(socketPath, opts.helloTimeoutMs, (socket, info) => {
      const c = new SidecarConnection(socket, info, opts);
      return { conn: c, onMessage: (m: WireMessage, readAt: number) => c.#onMessage(m, readAt), onFail: (err: RfdetrError) => c.#fail(err) };
    });
    return conn;
  }

  get closed(): boolean {
    return this.#closing;
  }

  /** Requests the sidecar is working on, including ones whose caller gave up. */
  get inFlight(): number {
    return this.#pending.size;
  }

  /** When the last frame from the sidecar (any reply or error, to any request) was read: it is alive then. */
  get lastReadAt(): number {
    return this.#lastReadAt;
  }

  /** Where the writes stand now, for wroteSince(). */
  writeMark(): WriteMark {
    return { at: performance.now(), queued: this.#kernelQueue() };
  }

  /**
   * Whether bytes went from this process to the kernel since `mark`: a frame finished, or the one being written
   * shrank. The kernel takes them only as the sidecar reads, so a request still unwritten behind a large frame
   * (a 200 MB image) says nothing against the sidecar while this is true.
   */
  wroteSince(mark: WriteMark): boolean {
    return this.#lastWrittenAt >= mark.at || this.#kernelQueue() < mark.queued;
  }

  /**
   * Bytes libuv holds for the kernel on this socket. No public API reports a partial write's progress (Node's
   * writableLength counts a frame until its callback); the stream handle's writeQueueSize is libuv's live
   * count (0 where a Node release lacks it, and then only finished frames count).
   */
  #kernelQueue(): number {
    const handle = (this.#socket as unknown as { _handle?: { writeQueueSize?: unknown } })._handle;
    return typeof handle?.writeQueueSize === 'number' ? handle.writeQueueSize : 0;
  }

  /** Age in ms of the oldest infer the sidecar has not answered (0 when none): a stuck forward shows here. */
  oldestInferMs(now = performance.now()): number {
    let oldest = 0;
    for (const p of this.#pending.values()) {
      if (p.op === 'infer') oldest = Math.max(oldest, now - p.sentAt);
    }
    return oldest;
  }

  /** Whether images travel through shared memory on this connection, and why not when they do not. */
  get shmStatus(): string {
    return this.#shm.status;
  }

  /** How many images this connection sent through shared memory. */
  get framesViaShm(): number {
    return this.#shm.frames;
  }

  /** A shared-memory slot a large decode may write into (shm-channel.ts); undefined when there is none to lend. */
  frameTarget(bytes: number): FrameTarget | undefined {
    return this.#shm.frameTarget(bytes);
  }

  /** Whether an image file of `format` may be sent as `{ encoded }` (decoder-caps.ts): false until the sidecar has said. */
  decodes(format: 'jpeg' | 'png'): boolean {
    return this.#decoders.decodes(format);
  }

  /** Resolves once decodes() has its answer (asking now if nobody has yet); never rejects. */
  decodersKnown(): Promise<void> {
    return this.#decoders.known();
  }

  /**
   * One forward: an image file the sidecar decodes (E_SIDECAR_DECLINED when it does not take it: decode it and
   * send `image`), a decoded image (by reference when it was decoded into or fits a shared-memory slot), or
   * pixel_values; sizes are checked before anything is sent.
   */
  async infer(input: InferInput, opts: { deadlineMs?: number; signal?: AbortSignal; select?: RowSelect } = {}): Promise<InferResult> {
    const select = selectFields(opts.select, this.info);
    let fields: RequestFields;
    let slot: number | undefined;
    let t0: number;
    if ('encoded' in input) {
      fields = encodedFields(input.encoded, this.#decoders);
      t0 = performance.now();
    } else if ('image' in input) {
      const { width, height, frame } = input.image;
      checkSides(width, height);
      // Decoded into one of this connection's slots: sent by reference, its pixels never read here.
      const framed = frame && this.#shm.refOf(frame, width, height);
      fields = framed ? { image_shm: framed.ref } : imageFields(input.image);
      slot = framed ? framed.slot : undefined;
      t0 = performance.now();
      const put = !framed && (await this.#shm.put(input.image.data, width, height));
      if (put) {
        slot = put.slot;
        fields = { image_shm: put.ref };
      }
    } else {
      fields = pixelFields(input.pixelValues, this.info.inputShape);
      t0 = performance.now();
    }
    const { message: reply, writtenAt, readAt } = await this.#request('infer', { ...fields, ...select }, opts.deadlineMs, opts.signal, slot);
    return this.#result(reply, { writtenAt, readAt, rtt: performance.now() - t0, encoded: 'encoded' in input });
  }

  /** An infer reply checked against the hello (infer-reply.ts); a reply that breaks it closes the connection. */
  #result(reply: WireMessage, timing: ReplyTiming): InferResult {
    const r = inferResultOf(reply, this.info, timing);
    if (typeof r === 'string') {
      const err = new RfdetrError('E_PROTOCOL', r);
      this.#fail(err);
      throw err;
    }
    return r;
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
      if (slot !== undefined) this.#shm.release(slot);
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
        op, resolve, reject, timer: undefined, judge: undefined, sentAt: performance.now(), writtenAt: undefined, abandoned: false, slot,
        cleanup: () => {
          if (p.timer) clearTimeout(p.timer);
          if (p.judge) clearImmediate(p.judge);
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
        // A timer runs in the loop's timers phase, before the poll phase reads the socket: after this process's
        // loop was held up past the deadline (a long parse, a GC, too little CPU under load), a reply the sidecar
        // sent in time is still unread. So the deadline is judged one turn later, once what arrived was read.
        p.timer = setTimeout(() => {
          p.timer = undefined;
          // For the log of a missed ping: whether the request had even left this process (a socket the sidecar
          // does not read holds it back) and how long it waited to (waitedMs), and how late this process's loop ran
          // the deadline.
          const facts = {
            op, deadlineMs, written: p.writtenAt !== undefined,
            waitedMs: p.writtenAt === undefined ? undefined : Math.round(p.writtenAt - p.sentAt),
            lateMs: Math.round(performance.now() - p.sentAt - deadlineMs),
          };
          p.judge = setImmediate(() => giveUp(new RfdetrError('E_DEADLINE',
            `the sidecar did not answer ${op} request ${id} within ${Math.round(deadlineMs)} ms`, facts)));
        }, Math.max(0, deadlineMs));
      }
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#pending.set(id, p);
      this.#socket.cork();
      for (let i = 0; i < frame.length - 1; i++) this.#socket.write(frame[i]!);
      this.#socket.write(frame[frame.length - 1]!, () => {
        p.writtenAt = performance.now();
        this.#lastWrittenAt = p.writtenAt;
      });
      this.#socket.uncork();
    });
  }

  #onMessage(m: WireMessage, readAt: number): void {
    this.#lastReadAt = readAt;
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
    if (p.slot !== undefined) this.#shm.release(p.slot);
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
      if (p.slot !== undefined) this.#shm.release(p.slot);
      if (!p.abandoned) p.reject(err);
    }
    this.#pending.clear();
    this.#shm.close();
    this.#opts.onClosed?.(err);
  }
}
