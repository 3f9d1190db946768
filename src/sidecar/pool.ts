// Several supervised sidecars (one per card, or N host workers) behind one InferenceBackend: the engine queue
// in front hands each request to the pool, which sends it to the ready sidecar with the fewest requests in
// flight (waiting, within the request's deadline, when none is ready). Each member keeps its own socket,
// READY, pings, restart backoff and cap; a member that fails for good is taken out (logged, shown in
// devices(), counted) and the others keep serving. The pool is `ready` while at least `minReady` members are,
// and `failed` once fewer than `minReady` could ever be again. close() drains and stops all of them.
import { RfdetrError, isRfdetrError } from '../errors.ts';
import type { FrameTarget } from '../image/frame-decode.ts';
import type { BackendState, DeviceStatus, InferenceBackend, InferInput, InferOptions, InferResult, SidecarInfo } from './backend.ts';
import { silentLogger, type Logger } from './logger.ts';
import { SidecarBackend, type SidecarBackendOptions } from './supervisor.ts';
import { prepareFrame, type FrameData, type Prepared, type TransportBudget } from './transport.ts';

export interface PoolOptions {
  /** One entry per sidecar; `label` names it (card index or worker-N). */
  members: (SidecarBackendOptions & { label: string })[];
  /** Ready members needed for the pool to be ready. Default 1. */
  minReady?: number;
  logger?: Logger;
}

interface Member {
  label: string;
  backend: SidecarBackend;
  forwards: number;
  forwardSeconds: number;
  removed: boolean;
}

export class SidecarPool implements InferenceBackend {
  readonly #members: Member[];
  readonly #minReady: number;
  readonly #log: Logger;
  readonly #listeners = new Set<(state: BackendState, prev: BackendState) => void>();
  /** Called on every member state change (the waits for a ready member). */
  readonly #memberChanged = new Set<() => void>();
  #state: BackendState = 'starting';
  #everReady = false;
  #closing = false;
  #removed = 0;
  #closePromise: Promise<void> | undefined;
  /** The member whose shared-memory slot each lent frame is in: its request goes to that member. */
  readonly #lent = new WeakMap<FrameTarget, Member>();

  constructor(opts: PoolOptions) {
    if (opts.members.length === 0) throw new RfdetrError('E_USAGE', 'a sidecar pool needs at least one member');
    this.#minReady = opts.minReady ?? 1;
    if (!Number.isInteger(this.#minReady) || this.#minReady < 1 || this.#minReady > opts.members.length) {
      throw new RfdetrError('E_USAGE', `--min-ready-devices: expected an integer from 1 to ${opts.members.length} (the pool's size) but received ${opts.minReady}`);
    }
    this.#log = opts.logger ?? silentLogger;
    this.#members = opts.members.map((m) => ({ label: m.label, backend: new SidecarBackend({ logger: this.#log, ...m }), forwards: 0, forwardSeconds: 0, removed: false }));
    for (const m of this.#members) m.backend.onStateChange((s) => this.#onMember(m, s));
    this.#log.info('sidecar pool', { devices: this.#members.map((m) => m.label), min_ready: this.#minReady, threads: opts.members.map((m) => m.threads ?? 0) });
  }

  get state(): BackendState {
    return this.#state;
  }

  get info(): SidecarInfo | null {
    return (this.#members.find((m) => m.backend.state === 'ready') ?? this.#members.find((m) => m.backend.info))?.backend.info ?? null;
  }

  get restarts(): number {
    return this.#members.reduce((n, m) => n + m.backend.restarts, 0);
  }

  /** Members taken out so far. */
  get removedCount(): number {
    return this.#removed;
  }

  get minReady(): number {
    return this.#minReady;
  }

  get failureReason(): string | null {
    if (this.#state === 'ready') return null;
    const why = this.#members.filter((m) => m.backend.failureReason).map((m) => `device ${m.label}: ${m.backend.failureReason}`);
    if (this.#state === 'starting' && why.length === 0) return null;
    const ready = this.#readyCount();
    return `${ready} of ${this.#members.length} devices ready, ${this.#minReady} needed${why.length ? `; ${why.join('; ')}` : ''}`;
  }

  /** The members' supervisors by label (diagnostics and tests). */
  member(label: string): SidecarBackend | undefined {
    return this.#members.find((m) => m.label === label)?.backend;
  }

  devices(): DeviceStatus[] {
    return this.#members.map((m) => ({
      device: m.label, state: m.backend.state, restarts: m.backend.restarts, lastFailure: m.backend.failureReason, removed: m.removed,
      inFlight: m.backend.inFlight, forwards: m.forwards, forwardSeconds: m.forwardSeconds, pid: m.backend.pid,
    }));
  }

  onStateChange(fn: (state: BackendState, prev: BackendState) => void): () => void {
    this.#listeners.add(fn);
    return () => this.#listeners.delete(fn);
  }

  /** Resolves once the pool is ready; rejects when it failed or was closed first (or after timeoutMs). */
  ready(timeoutMs?: number): Promise<void> {
    return this.#waitFor(() => this.#state === 'ready', timeoutMs, undefined, () => `the pool was not ready within ${timeoutMs} ms (${this.failureReason ?? this.#state})`);
  }

  async infer(input: InferInput, opts: InferOptions = {}): Promise<InferResult> {
    const deadlineMs = opts.deadlineMs ?? 60_000;
    const t0 = performance.now();
    let m = this.#ownerOf(input) ?? this.#pick();
    if (!m) {
      try {
        await this.#waitFor(() => this.#pick() !== undefined, deadlineMs, opts.signal, () => `the request deadline of ${deadlineMs} ms passed with no device ready (${this.failureReason ?? this.#state})`);
      } catch (e) {
        if (isRfdetrError(e, 'E_STARTING')) throw new RfdetrError('E_DEADLINE', (e as RfdetrError).message, { state: this.#state });
        throw e;
      }
      m = this.#pick()!;
    }
    const r = await m.backend.infer(input, { ...opts, deadlineMs: Math.max(1, deadlineMs - (performance.now() - t0)) });
    m.forwards++;
    m.forwardSeconds += r.forwardMs / 1000;
    return r;
  }

  prepare(frame: FrameData, budget?: TransportBudget): Promise<Prepared> {
    return prepareFrame(this, frame, budget);
  }

  /**
   * A shared-memory slot for a large decode, lent by the least busy serving member that has one free (each
   * keeps one of its two slots for copied frames); infer() then sends the frame to that member, which takes it
   * by reference.
   */
  frameTarget(bytes: number): FrameTarget | undefined {
    const serving = this.#members.filter((m) => m.backend.serving).sort((a, b) => a.backend.inFlight - b.backend.inFlight);
    for (const m of serving) {
      const t = m.backend.frameTarget(bytes);
      if (!t) continue;
      this.#lent.set(t, m);
      return t;
    }
    return undefined;
  }

  /**
   * True only when every serving member decodes image files of `format`: the member is picked when the
   * request is sent, so the answer must hold for whichever it is. (A member that starts serving in between
   * with its answer not yet in refuses the file with E_SIDECAR_DECLINED, and the caller decodes it.)
   */
  decodes(format: 'jpeg' | 'png'): boolean {
    let any = false;
    let all = true;
    for (const m of this.#members) {
      if (!m.backend.serving) continue;
      any = true;
      // Every serving member is asked (each asks its sidecar on its first call), not just up to the first no.
      all = m.backend.decodes(format) && all;
    }
    return any && all;
  }

  /** Resolves once every member's current connection knows what it decodes; never rejects. */
  async decodersKnown(): Promise<void> {
    await Promise.all(this.#members.map((m) => m.backend.decodersKnown()));
  }

  close(): Promise<void> {
    this.#closePromise ??= (async () => {
      this.#closing = true;
      this.#wake();
      await Promise.all(this.#members.map((m) => m.backend.close()));
      this.#setState('stopped');
    })();
    return this.#closePromise;
  }

  destroy(err?: Error): void {
    this.#closing = true;
    for (const m of this.#members) m.backend.destroy(err);
    this.#wake();
    this.#setState('stopped');
  }

  // ---- internals -------------------------------------------------------------------------------------------

  /** The serving member with the fewest requests in flight (the first of equals), or undefined. */
  #pick(): Member | undefined {
    let best: Member | undefined;
    for (const m of this.#members) {
      if (!m.backend.serving) continue;
      if (!best || m.backend.inFlight < best.backend.inFlight) best = m;
    }
    return best;
  }

  /**
   * The member an image decoded into a slot it lent belongs to, while it serves and has no more in flight than
   * the least busy: sent elsewhere, its pixels would be read back and copied (a 12 MP frame: ~36 MB), which
   * costs less than waiting behind a forward.
   */
  #ownerOf(input: InferInput): Member | undefined {
    const frame = 'image' in input ? input.image.frame : undefined;
    const m = frame && this.#lent.get(frame);
    if (!m || !m.backend.serving) return undefined;
    const best = this.#pick();
    return best && m.backend.inFlight <= best.backend.inFlight ? m : undefined;
  }

  #readyCount(): number {
    return this.#members.filter((m) => m.backend.state === 'ready').length;
  }

  #waitFor(cond: () => boolean, timeoutMs: number | undefined, signal: AbortSignal | undefined, timeoutMessage: () => string): Promise<void> {
    const blocked = () => this.#closing ? new RfdetrError('E_CLOSED', 'the inference backend is closed; create a new one')
      : this.#state === 'failed' ? new RfdetrError('E_SIDECAR_FAILED', this.failureReason ?? 'every device failed') : undefined;
    if (cond()) return Promise.resolve();
    const first = blocked();
    if (first) return Promise.reject(first);
    return new Promise<void>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const done = (e?: Error) => {
        if (timer) clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        this.#memberChanged.delete(check);
        if (e) reject(e);
        else resolve();
      };
      const check = () => {
        if (cond()) return done();
        const e = blocked();
        if (e) done(e);
      };
      const onAbort = () => done(new RfdetrError('E_ABORTED', 'aborted while waiting for a ready device'));
      if (timeoutMs !== undefined) timer = setTimeout(() => done(new RfdetrError('E_STARTING', timeoutMessage(), { state: this.#state })), Math.max(0, timeoutMs));
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#memberChanged.add(check);
    });
  }

  #wake(): void {
    for (const f of [...this.#memberChanged]) f();
  }

  #onMember(m: Member, s: BackendState): void {
    if (s === 'failed' && !m.removed && !this.#closing) {
      m.removed = true;
      this.#removed++;
      this.#log.error(`device ${m.label} taken out of the pool: ${m.backend.failureReason ?? 'it failed'}`,
        { event: 'device_removed', device: m.label, ready: this.#readyCount(), of: this.#members.length });
    }
    if (s === 'ready') this.#everReady = true;
    this.#setState(this.#aggregate());
    this.#wake();
  }

  #aggregate(): BackendState {
    if (this.#closing) return this.#members.every((m) => m.backend.state === 'stopped') ? 'stopped' : this.#state;
    const states = this.#members.map((m) => m.backend.state);
    if (this.#readyCount() >= this.#minReady) return 'ready';
    if (states.filter((s) => s !== 'failed' && s !== 'stopped').length < this.#minReady) return 'failed';
    if (states.includes('unresponsive')) return 'unresponsive';
    return this.#everReady ? 'restarting' : 'starting';
  }

  #setState(next: BackendState): void {
    const prev = this.#state;
    if (prev === next) return;
    this.#state = next;
    // The members log their own transitions; a pool of one would only repeat them.
    if (this.#members.length > 1) this.#log[next === 'failed' ? 'error' : 'info'](`pool: ${this.#readyCount()} of ${this.#members.length} devices ready (${this.#minReady} needed): ${next}`,
      { event: 'pool_state', from: prev, to: next });
    for (const l of this.#listeners) l(next, prev);
  }
}

/** A pool of supervised sidecars; starts them all at once. */
export function createPool(opts: PoolOptions): SidecarPool {
  return new SidecarPool(opts);
}
