// The supervised sidecar: spawns rfdetr-sidecar, waits for its READY line, connects, checks the hello, pings
// it, and restarts it with exponential backoff when it dies; more than `maxCrashes` deaths in `windowMs` →
// `failed`. A sidecar that exits before READY with its documented startup-failure (1) or usage (2) status is
// not restarted: the same flags and files would fail the same way, so the backend fails at once with the
// sidecar's own message. A clean exit (0) while serving (someone else told it to stop) is restarted without
// counting as a crash. External mode connects to a sidecar someone else runs (systemd) and reconnects with the
// same backoff and cap instead of spawning. A ready sidecar that misses a ping is `unresponsive` (not served,
// /ready 503) until it answers one again, and is killed after `maxMissedPings` in a row. A ping is missed only
// when nothing at all came from the sidecar while it waited: a reply to another request shows it alive, and so
// does a ping still queued behind frames the sidecar was reading (the kernel took bytes of them meanwhile).
//
// The lifecycle is one value, #phase, with the data that phase owns:
//   starting → ready ⇄ unresponsive → restarting (backoff, then the next launch) → ready … | failed | stopped
// and each transition is logged once ("engine state: a -> b"). close() drains, then SIGTERM → SIGKILL, each
// with a deadline; destroy(err) rejects everything at once.
import { readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { packageRoot, sidecarBinary } from '../config/paths.ts';
import { RfdetrError, isRfdetrError } from '../errors.ts';
import type { FrameTarget } from '../image/frame-decode.ts';
import type { BackendState, EnginePriority, InferenceBackend, InferInput, InferOptions, InferResult, SidecarInfo } from './backend.ts';
import { SidecarConnection } from './client.ts';
import { silentLogger, type Logger } from './logger.ts';
import { SidecarProcess, type ExitInfo } from './sidecar-process.ts';
import { makeSocketDir, sweepStaleSocketDirs } from './socket-dir.ts';
import { prepareFrame, type FrameData, type Prepared, type TransportBudget } from './transport.ts';

export { silentLogger, type Logger } from './logger.ts';

export interface SidecarBackendOptions {
  /** Engine name passed to the sidecar (`--engine`); default `cpu`. */
  engine?: string;
  /** Directory with model.safetensors + config.json (`--weights`); required unless `external`. */
  weightsDir?: string;
  /** `--threads` (0 = physical cores). */
  threads?: number;
  /** `--nice`: the sidecar raises its priority to this (-20..0) at start when the host permits it; 0 or absent: not asked. */
  nice?: number;
  /** `--load-nice`: the checkpoint load and warm-up at this nice (0..19), then back to `nice`; only where `nice` is applied. */
  loadNice?: number;
  /** `--device-id` for accelerator engines. */
  deviceId?: number;
  /** `--precision`: one the engine runs (`rfdetr-sidecar --list-engines`); absent: the engine's default. */
  precision?: string;
  /** Socket path: where the spawned sidecar listens (default: a fresh 0700 temp dir), or the external sidecar's socket. */
  socketPath?: string;
  /** Connect to an existing sidecar at `socketPath` (e.g. a systemd unit); never spawn. */
  external?: boolean;
  /** The executable and leading arguments (default: sidecarBinary()); tests point this at a scripted fake. */
  command?: { file: string; args?: string[] };
  /** Extra environment for the sidecar process. */
  env?: Record<string, string | undefined>;
  logger?: Logger;
  /** Added to every log line as `device` (the pool's device or worker label). */
  label?: string;
  /** Spawn → READY → hello, and the external hello wait. Default 300 000 (loading real weights on a slow disk). */
  startupTimeoutMs?: number;
  /** Per-request deadline when InferOptions.deadlineMs is not given. Default 60 000. */
  defaultDeadlineMs?: number;
  /**
   * Liveness pings every `pingIntervalMs` (default 2 000), each answered within `pingTimeoutMs` (default
   * 2 000) or missed (no frame at all from the sidecar meanwhile, and no bytes read by it if the ping was still
   * queued behind other frames, or left them with under half its deadline to go): one miss → `unresponsive`,
   * `maxMissedPings`
   * (default 5) in a row → killed and restarted.
   */
  pingIntervalMs?: number;
  pingTimeoutMs?: number;
  maxMissedPings?: number;
  /** An infer the sidecar has not answered for this long means a stuck forward: kill and restart. Default 300 000. */
  stallMs?: number;
  restart?: { initialDelayMs?: number; maxDelayMs?: number; maxCrashes?: number; windowMs?: number };
  closeTimeouts?: { drainMs?: number; termMs?: number; killMs?: number };
  /** Lines of sidecar stderr kept for error reports. Default 20. */
  stderrTailLines?: number;
}

type ResolvedOptions = SidecarBackendOptions & {
  engine: string; external: boolean; logger: Logger; startupTimeoutMs: number; defaultDeadlineMs: number;
  pingIntervalMs: number; pingTimeoutMs: number; maxMissedPings: number; stallMs: number; stderrTailLines: number;
};

/** One launch: the process (spawn mode) and, once connected, its connection. Its identity is the generation. */
interface Attempt {
  proc: SidecarProcess | undefined;
  dead: boolean;
}

/** The pings of a connected sidecar. */
interface Liveness {
  timer: NodeJS.Timeout;
  missed: number;
  pinging: boolean;
}

type Phase =
  /** The first launch: spawning, waiting for READY, connecting. */
  | { state: 'starting'; attempt: Attempt }
  | { state: 'ready'; attempt: Attempt; conn: SidecarConnection; live: Liveness }
  | { state: 'unresponsive'; attempt: Attempt; conn: SidecarConnection; live: Liveness }
  /** After a death: the backoff `timer`, then the next launch's `attempt`; `reason` is the death. */
  | { state: 'restarting'; reason: string; timer: NodeJS.Timeout | undefined; attempt: Attempt | undefined }
  | { state: 'failed'; failure: RfdetrError }
  | { state: 'stopped'; failure: RfdetrError | undefined };

interface Waiter {
  resolve: () => void;
  reject: (e: Error) => void;
}

/** The sidecar's documented exit statuses before READY that mean "this configuration cannot start" (sidecar --help). */
const STARTUP_EXIT_CODES: ReadonlyMap<number, string> = new Map([[1, 'startup failure'], [2, 'usage error']]);

/** Hub credentials: the sidecar loads files from a directory and never talks to the Hub, so it gets none. */
const CREDENTIAL_VARS = /^(HF_TOKEN|HF_HUB_TOKEN|HF_API_TOKEN|HUGGING_FACE_HUB_TOKEN|HUGGINGFACE_TOKEN|HF_TOKEN_PATH)$/i;

/** This process's environment without the Hub credentials, for the sidecar. */
export function sidecarEnvironment(env: NodeJS.ProcessEnv): Record<string, string | undefined> {
  return Object.fromEntries(Object.entries(env).filter(([k]) => !CREDENTIAL_VARS.test(k)));
}

const packageVersion = (JSON.parse(readFileSync(path.join(packageRoot, 'package.json'), 'utf8')) as { version: string }).version;

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T | 'timeout'> {
  let t: NodeJS.Timeout;
  return Promise.race([p, new Promise<'timeout'>((r) => { t = setTimeout(() => r('timeout'), ms); })]).finally(() => clearTimeout(t));
}

export class SidecarBackend implements InferenceBackend {
  readonly #o: ResolvedOptions;
  readonly #log: Logger;
  readonly #fields: Record<string, unknown>;
  readonly #restart: Required<NonNullable<SidecarBackendOptions['restart']>>;
  readonly #closeT: Required<NonNullable<SidecarBackendOptions['closeTimeouts']>>;
  readonly #socketPath: string;
  readonly #ownedDir: string | undefined;
  readonly #listeners = new Set<(state: BackendState, prev: BackendState) => void>();

  #phase: Phase;
  /** The last hello (kept across restarts for /info). */
  #info: SidecarInfo | null = null;
  /** Deaths inside the crash window and (re)starts after the first, over the backend's life. */
  readonly #history = { crashes: [] as number[], restarts: 0 };
  /** Callers of ready() and infer(), for the waits and the drain. */
  readonly #calls = { waiters: new Set<Waiter>(), active: 0, drained: [] as (() => void)[] };
  /** Set once by close() or destroy(): nothing new starts. */
  #closing: { promise: Promise<void> | undefined } | undefined;

  constructor(opts: SidecarBackendOptions) {
    if (opts.external && !opts.socketPath) {
      throw new RfdetrError('E_USAGE', 'external mode needs socketPath: the socket of the sidecar to connect to');
    }
    if (!opts.external && !opts.weightsDir) {
      throw new RfdetrError('E_USAGE', 'weightsDir is required to spawn a sidecar (a directory with model.safetensors and config.json)');
    }
    this.#o = {
      engine: 'cpu', external: false, logger: silentLogger, startupTimeoutMs: 300_000, defaultDeadlineMs: 60_000,
      pingIntervalMs: 2_000, pingTimeoutMs: 2_000, maxMissedPings: 5, stallMs: 300_000, stderrTailLines: 20,
      ...Object.fromEntries(Object.entries(opts).filter(([, v]) => v !== undefined)),
    } as ResolvedOptions;
    this.#log = this.#o.logger;
    this.#fields = opts.label === undefined ? {} : { device: opts.label };
    this.#restart = { initialDelayMs: 250, maxDelayMs: 10_000, maxCrashes: 5, windowMs: 180_000, ...opts.restart };
    this.#closeT = { drainMs: 30_000, termMs: 5_000, killMs: 2_000, ...opts.closeTimeouts };
    if (opts.socketPath) {
      this.#socketPath = opts.socketPath;
    } else {
      const swept = sweepStaleSocketDirs();
      if (swept.length) this.#log.info('removed socket directories left by exited processes', { dirs: swept });
      const { dir, socketPath } = makeSocketDir();
      this.#ownedDir = dir;
      this.#socketPath = socketPath;
    }
    const attempt: Attempt = { proc: undefined, dead: false };
    this.#phase = { state: 'starting', attempt };
    this.#log.info('engine state: starting', { event: 'engine_state', to: 'starting', mode: this.#o.external ? 'external' : 'spawn', socket: this.#socketPath, ...this.#fields });
    void this.#launch(attempt);
  }

  get state(): BackendState {
    return this.#phase.state;
  }

  get info(): SidecarInfo | null {
    return this.#info;
  }

  /** The error that put the backend in `failed` (or was passed to destroy). */
  get failure(): RfdetrError | undefined {
    const p = this.#phase;
    return p.state === 'failed' || p.state === 'stopped' ? p.failure : undefined;
  }

  /** The current sidecar process id (spawn mode), for diagnostics and tests. */
  get pid(): number | undefined {
    const p = this.#phase;
    return 'attempt' in p ? p.attempt?.proc?.pid : undefined;
  }

  get restarts(): number {
    return this.#history.restarts;
  }

  get failureReason(): string | null {
    const p = this.#phase;
    switch (p.state) {
      case 'starting': return null;
      case 'ready': return null;
      case 'unresponsive': return `the sidecar missed ${p.live.missed} ping(s) of ${this.#o.pingTimeoutMs} ms`;
      case 'restarting': return p.reason;
      case 'failed': return p.failure.message;
      case 'stopped': return p.failure?.message ?? null;
    }
  }

  get socketPath(): string {
    return this.#socketPath;
  }

  /** Ready and its connection open: a request sent now reaches the sidecar (false from the moment its socket closes). */
  get serving(): boolean {
    const p = this.#phase;
    return p.state === 'ready' && !p.conn.closed;
  }

  /** Images the current connection sent through shared memory, copied or by reference (SidecarConnection.framesViaShm). */
  get framesViaShm(): number {
    const p = this.#phase;
    return 'conn' in p ? p.conn.framesViaShm : 0;
  }

  /** Requests handed to this backend and not yet settled. */
  get inFlight(): number {
    return this.#calls.active;
  }

  /** Calls `fn(state, previous)` on every transition; returns an unsubscribe function. */
  onStateChange(fn: (state: BackendState, prev: BackendState) => void): () => void {
    this.#listeners.add(fn);
    return () => this.#listeners.delete(fn);
  }

  /** Resolves when the backend is ready; rejects when it failed or was closed first (or after timeoutMs). */
  ready(timeoutMs?: number, signal?: AbortSignal): Promise<void> {
    const p = this.#phase;
    if (p.state === 'ready') return Promise.resolve();
    if (p.state === 'failed') return Promise.reject(p.failure);
    if (p.state === 'stopped' || this.#closing) return Promise.reject(this.#closedError());
    return new Promise<void>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const done = () => {
        if (timer) clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        this.#calls.waiters.delete(w);
      };
      const w: Waiter = { resolve: () => { done(); resolve(); }, reject: (e) => { done(); reject(e); } };
      const onAbort = () => w.reject(new RfdetrError('E_ABORTED', 'aborted while waiting for the sidecar to become ready'));
      if (timeoutMs !== undefined) {
        timer = setTimeout(() => w.reject(new RfdetrError('E_STARTING',
          `the sidecar was not ready within ${timeoutMs} ms (state ${this.state})`, { state: this.state })), Math.max(0, timeoutMs));
      }
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#calls.waiters.add(w);
    });
  }

  async infer(input: InferInput, opts: InferOptions = {}): Promise<InferResult> {
    if (this.#closing || this.#phase.state === 'stopped') throw this.#closedError();
    if (this.#phase.state === 'failed') throw this.#phase.failure;
    const deadlineMs = opts.deadlineMs ?? this.#o.defaultDeadlineMs;
    const t0 = performance.now();
    this.#calls.active++;
    try {
      if (this.#phase.state !== 'ready') {
        try {
          await this.ready(deadlineMs, opts.signal);
        } catch (e) {
          if (isRfdetrError(e, 'E_STARTING')) {
            throw new RfdetrError('E_DEADLINE', `the request deadline of ${deadlineMs} ms passed while the sidecar was ${this.state}`, { state: this.state });
          }
          throw e;
        }
      }
      const p = this.#phase;
      if (p.state !== 'ready') throw new RfdetrError('E_SIDECAR_EXITED', `the sidecar became ${p.state} before the request could be sent`, { state: p.state });
      return await p.conn.infer(input, { deadlineMs: deadlineMs - (performance.now() - t0), signal: opts.signal, select: opts.select });
    } finally {
      this.#calls.active--;
      if (this.#calls.active === 0) for (const d of this.#calls.drained.splice(0)) d();
    }
  }

  prepare(frame: FrameData, budget?: TransportBudget): Promise<Prepared> {
    return prepareFrame(this, frame, budget);
  }

  /** A shared-memory slot of the current sidecar for a large decode (SidecarConnection.frameTarget); the transport's. */
  frameTarget(bytes: number): FrameTarget | undefined {
    const p = this.#phase;
    return p.state === 'ready' && !this.#closing ? p.conn.frameTarget(bytes) : undefined;
  }

  /** Whether the current sidecar decodes image files of `format` (SidecarConnection.decodes); false unless ready. */
  decodes(format: 'jpeg' | 'png'): boolean {
    const p = this.#phase;
    return p.state === 'ready' && !this.#closing ? p.conn.decodes(format) : false;
  }

  /** Resolves once the current connection knows what it decodes (at once when there is none); never rejects. */
  decodersKnown(): Promise<void> {
    const p = this.#phase;
    return 'conn' in p ? p.conn.decodersKnown() : Promise.resolve();
  }

  close(): Promise<void> {
    this.#closing ??= { promise: undefined };
    this.#closing.promise ??= this.#close();
    return this.#closing.promise;
  }

  destroy(err?: Error): void {
    const e = err ? (err instanceof RfdetrError ? err : new RfdetrError('E_CLOSED', `the backend was destroyed: ${err.message}`, undefined, { cause: err }))
      : new RfdetrError('E_CLOSED', 'the backend was destroyed');
    this.#closing ??= { promise: undefined };
    const p = this.#phase;
    if (p.state === 'stopped') return;
    this.#leave(p);
    for (const w of [...this.#calls.waiters]) w.reject(e);
    if ('attempt' in p && p.attempt) {
      p.attempt.dead = true;
      if ('conn' in p) p.conn.close(e);
      p.attempt.proc?.kill('SIGKILL');
    }
    this.#enter({ state: 'stopped', failure: p.state === 'failed' ? p.failure : e }, { reason: e.message });
    this.#removeOwnedDir();
  }

  // ---- internals -------------------------------------------------------------------------------------------

  #closedError(): RfdetrError {
    return new RfdetrError('E_CLOSED', 'the inference backend is closed; create a new one');
  }

  /** The attempt of the current phase, if it has one. */
  #current(): Attempt | undefined {
    const p = this.#phase;
    return 'attempt' in p ? p.attempt : undefined;
  }

  /** Releases what a phase owns that outlives it unless stopped: its timers. */
  #leave(p: Phase): void {
    if (p.state === 'ready' || p.state === 'unresponsive') clearInterval(p.live.timer);
    if (p.state === 'restarting' && p.timer) clearTimeout(p.timer);
  }

  /** The one transition: replace the phase, log it once, tell the listeners. */
  #enter(next: Phase, fields: Record<string, unknown> = {}): void {
    const prev = this.#phase.state;
    this.#phase = next;
    // A death during a restart's launch is a new restart (its own backoff): logged, though the state stays.
    if (prev === next.state && next.state !== 'restarting') return;
    const log = next.state === 'failed' ? this.#log.error : next.state === 'restarting' || next.state === 'unresponsive' ? this.#log.warn : this.#log.info;
    log.call(this.#log, `engine state: ${prev} -> ${next.state}`, { event: 'engine_state', from: prev, to: next.state, ...this.#fields, ...fields });
    if (prev !== next.state) for (const l of this.#listeners) l(next.state, prev);
  }

  #removeOwnedDir(): void {
    if (this.#ownedDir) rmSync(this.#ownedDir, { recursive: true, force: true });
  }

  #sidecarArgs(): string[] {
    const o = this.#o;
    const args = ['--socket', this.#socketPath, '--engine', o.engine, '--weights', o.weightsDir!, '--exit-with-parent', '--own-process-group'];
    if (o.threads !== undefined) args.push('--threads', String(o.threads));
    if (o.deviceId !== undefined) args.push('--device-id', String(o.deviceId));
    if (o.precision !== undefined) args.push('--precision', o.precision);
    if (o.nice !== undefined && o.nice !== 0) args.push('--nice', String(o.nice));
    if (o.loadNice !== undefined && o.loadNice !== 0) args.push('--load-nice', String(o.loadNice));
    return args;
  }

  /** A startup exit with a documented status: the backend fails with what the sidecar said, not as a crash. */
  #startupFailure(err: RfdetrError): RfdetrError | null {
    const d = err.details;
    if (this.#o.external || err.code !== 'E_SIDECAR_EXITED' || d?.phase !== 'startup' || typeof d.exitCode !== 'number') return null;
    const kind = STARTUP_EXIT_CODES.get(d.exitCode);
    if (!kind) return null;
    const tail = (d.stderrTail as string[] | undefined) ?? [];
    // Its own lines (rfdetr-sidecar: …) say what to fix; engine log lines before them do not.
    const own = tail.filter((l) => l.startsWith('rfdetr-sidecar: ')).map((l) => l.slice('rfdetr-sidecar: '.length));
    const said = (own.length ? own : tail.slice(-3)).join('; ') || '(it printed nothing on stderr)';
    return new RfdetrError('E_SIDECAR_FAILED', `the sidecar could not start (exit status ${d.exitCode}, ${kind}; not restarted): ${said}`,
      { ...d, reason: kind === 'usage error' ? 'usage' : 'startup' }, { cause: err });
  }

  #spawn(attempt: Attempt): SidecarProcess {
    const cmd = this.#o.command ?? { file: sidecarBinary(), args: [] };
    const proc = new SidecarProcess({
      file: cmd.file, args: [...(cmd.args ?? []), ...this.#sidecarArgs()],
      // The inherited environment without Hub credentials, plus what the caller asked for.
      env: { ...sidecarEnvironment(process.env), ...this.#o.env },
      stderrTailLines: this.#o.stderrTailLines, logger: this.#log, logFields: this.#fields,
    });
    attempt.proc = proc;
    void proc.exit.then((info) => {
      // While serving, the socket's EOF usually gets here first; whichever is first runs the one close path.
      // Before the connection exists, waitReady / connect report the death (as a startup failure).
      const p = this.#phase;
      if ('conn' in p && p.attempt === attempt) p.conn.close(proc.exitError(info, 'while serving'));
    });
    return proc;
  }

  async #launch(attempt: Attempt): Promise<void> {
    let conn: SidecarConnection;
    let priority: EnginePriority | undefined;
    try {
      const connectOpts = {
        helloTimeoutMs: this.#o.startupTimeoutMs,
        explainClose: (cause: RfdetrError) => this.#explainClose(attempt, cause),
        onClosed: (err: RfdetrError) => this.#onDeath(attempt, err),
      };
      if (this.#o.external) {
        conn = await SidecarConnection.connect(this.#socketPath, connectOpts);
      } else {
        const proc = this.#spawn(attempt);
        const ready = await proc.waitReady(this.#o.startupTimeoutMs);
        priority = ready.nice;
        conn = await SidecarConnection.connect(ready.socket ?? this.#socketPath, connectOpts);
      }
    } catch (e) {
      const err = e instanceof RfdetrError ? e : new RfdetrError('E_SIDECAR_EXITED', `starting the sidecar failed: ${(e as Error).message}`, undefined, { cause: e });
      // Connected to nothing sensible (bad hello): the process is of no use.
      if (attempt.proc && attempt.proc.exitInfo === undefined && err.code !== 'E_SIDECAR_EXITED') attempt.proc.kill('SIGKILL');
      this.#onDeath(attempt, err);
      return;
    }
    const p = this.#phase;
    if (attempt.dead || this.#closing || (p.state !== 'starting' && p.state !== 'restarting') || p.attempt !== attempt) {
      conn.close();
      return;
    }
    this.#info = priority ? { ...conn.info, enginePriority: priority } : conn.info;
    if (priority && priority.requested !== 0 && (!priority.applied || priority.autogroup.startsWith('/proc'))) {
      this.#log.warn(`the sidecar's --nice ${priority.requested} was not applied (it runs at nice ${priority.nice}; autogroup: ${priority.autogroup}): ${priority.note ?? 'no reason given'}`, { event: 'engine_nice_not_applied', ...this.#fields });
    }
    if (conn.info.sidecarVersion !== packageVersion && !this.#o.external) {
      // Same protocol, different builds: it works, but a stale sidecar build is worth knowing about.
      this.#log.warn(`sidecar ${conn.info.sidecarVersion} differs from this package ${packageVersion}; rebuild with npm install`, this.#fields);
    }
    const live: Liveness = { timer: setInterval(() => void this.#healthCheck(attempt), this.#o.pingIntervalMs), missed: 0, pinging: false };
    live.timer.unref();
    this.#enter({ state: 'ready', attempt, conn, live },
      { engine: conn.info.engine, device_name: conn.info.device, sidecarVersion: conn.info.sidecarVersion, pid: attempt.proc?.pid });
    for (const w of [...this.#calls.waiters]) w.resolve();
  }

  /** For a spawned sidecar, a closed socket is explained by the process's exit (waited for briefly). */
  async #explainClose(attempt: Attempt, cause: RfdetrError): Promise<RfdetrError> {
    const proc = attempt.proc;
    if (!proc || this.#current() !== attempt) return cause;
    if (cause.code !== 'E_SIDECAR_EXITED') {
      proc.kill('SIGKILL');  // a sidecar that broke the protocol cannot be trusted with the next request
      return new RfdetrError(cause.code, cause.message, { ...cause.details, stderrTail: proc.stderrTail });
    }
    const info = await withTimeout(proc.exit, 500);
    if (info === 'timeout') {
      proc.kill('SIGKILL');
      return new RfdetrError('E_SIDECAR_EXITED', `${cause.message}; the process did not exit, so it was killed`, { ...cause.details, stderrTail: proc.stderrTail });
    }
    return proc.exitError(info, 'while serving');
  }

  async #healthCheck(attempt: Attempt): Promise<void> {
    const p = this.#phase;
    if (!('conn' in p) || p.attempt !== attempt || p.live.pinging) return;
    const { conn, live } = p;
    const stalled = conn.oldestInferMs();
    if (stalled > this.#o.stallMs) {
      this.#kill(attempt, conn, new RfdetrError('E_SIDECAR_EXITED', `the sidecar has not answered an infer for ${Math.round(stalled)} ms (stallMs ${this.#o.stallMs}); killed it`, { reason: 'stalled' }));
      return;
    }
    live.pinging = true;
    const sentAt = performance.now();
    const mark = conn.writeMark();
    try {
      await conn.ping(this.#o.pingTimeoutMs);
      this.#alive(attempt, conn, live, 'answered a ping');
    } catch (e) {
      if (!isRfdetrError(e, 'E_DEADLINE') || this.#current() !== attempt) return;
      if (conn.lastReadAt >= sentAt) {
        // Its answers to other requests arrived while the ping waited: the process reads, works and writes.
        this.#log.debug('sidecar answered other requests but not the ping in time; counted alive', { timeoutMs: this.#o.pingTimeoutMs, ...this.#fields });
        this.#alive(attempt, conn, live, 'answered another request');
        return;
      }
      const waitedMs = typeof e.details?.waitedMs === 'number' ? e.details.waitedMs : 0;
      if ((e.details?.written === false || waitedMs > this.#o.pingTimeoutMs / 2) && conn.wroteSince(mark)) {
        // The ping waited behind frames (a 200 MB image) that the sidecar was still reading: it never left, or left
        // with under half its deadline to go and the rest of the backlog still ahead of it in the socket (missed
        // that way on a 2-core Xeon: 2 of 3 runs of the slow-reader test). The kernel took bytes meanwhile, so the
        // process reads; one that stops reading stops the bytes too, and the ping stays unwritten.
        this.#log.debug('the ping waited behind frames the sidecar was reading; counted alive', { timeoutMs: this.#o.pingTimeoutMs, ...this.#fields });
        this.#alive(attempt, conn, live, 'read the frames before the ping');
        return;
      }
      live.missed++;
      this.#log.warn(`sidecar missed a ping (${live.missed}/${this.#o.maxMissedPings})`, {
        timeoutMs: this.#o.pingTimeoutMs, pingWritten: e.details?.written, pingWaitedMs: e.details?.waitedMs, loopLateMs: e.details?.lateMs,
        infersInFlight: conn.inFlight, ...this.#fields,
      });
      if (live.missed >= this.#o.maxMissedPings) {
        this.#kill(attempt, conn, new RfdetrError('E_SIDECAR_EXITED',
          `the sidecar missed ${live.missed} pings of ${this.#o.pingTimeoutMs} ms; killed it`, { reason: 'unresponsive' }));
      } else if (this.#phase.state === 'ready') {
        this.#enter({ state: 'unresponsive', attempt, conn, live }, { missed_pings: live.missed });
      }
    } finally {
      live.pinging = false;
    }
  }

  /** The sidecar showed it is alive: the misses start over, and an unresponsive one is ready again. */
  #alive(attempt: Attempt, conn: SidecarConnection, live: Liveness, reason: string): void {
    live.missed = 0;
    const now = this.#phase;
    if (now.state === 'unresponsive' && now.attempt === attempt) {
      this.#enter({ state: 'ready', attempt, conn, live }, { reason });
      for (const w of [...this.#calls.waiters]) w.resolve();
    }
  }

  #kill(attempt: Attempt, conn: SidecarConnection, err: RfdetrError): void {
    this.#log.error(err.message, this.#fields);
    attempt.proc?.kill('SIGKILL');
    conn.close(new RfdetrError(err.code, err.message, { ...err.details, stderrTail: attempt.proc?.stderrTail ?? [] }));
    this.#onDeath(attempt, err);
  }

  /** The one place a sidecar's death is handled (once per attempt): restart with backoff, or fail. */
  #onDeath(attempt: Attempt, err: RfdetrError): void {
    if (attempt.dead || this.#current() !== attempt) return;
    attempt.dead = true;
    const p = this.#phase;
    this.#leave(p);
    if ('conn' in p) p.conn.close(err);
    if (attempt.proc && attempt.proc.exitInfo === undefined) attempt.proc.kill('SIGKILL');
    if (this.#closing) return;

    if (err.code === 'E_VERSION_MISMATCH' || err.details?.unservable === true) {
      this.#fail(err);  // restarting the same binary cannot fix it (another protocol version, a task this server cannot serve)
      return;
    }
    const startup = this.#startupFailure(err);
    if (startup) {
      this.#fail(startup);
      return;
    }
    if (!this.#o.external && err.details?.phase === 'serving' && err.details.exitCode === 0 && !err.details.signal) {
      // A clean stop we did not ask for (a shutdown op from another client of the socket): not a crash.
      this.#scheduleRestart(this.#restart.initialDelayMs, err, { crash: false });
      return;
    }
    const now = performance.now();
    const crashes = this.#history.crashes.filter((t) => now - t < this.#restart.windowMs);
    crashes.push(now);
    this.#history.crashes = crashes;
    if (crashes.length > this.#restart.maxCrashes) {
      this.#fail(new RfdetrError('E_SIDECAR_FAILED',
        `the sidecar crashed ${crashes.length} times in the last ${Math.round(this.#restart.windowMs / 1000)} s; not restarting. ` +
        `Last failure: ${err.message}`, { ...err.details, crashes: crashes.length, lastError: err.code }, { cause: err }));
      return;
    }
    this.#scheduleRestart(Math.min(this.#restart.maxDelayMs, this.#restart.initialDelayMs * 2 ** (crashes.length - 1)), err, { crashes: crashes.length });
  }

  #scheduleRestart(delayMs: number, err: RfdetrError, fields: Record<string, unknown>): void {
    const phase: Extract<Phase, { state: 'restarting' }> = { state: 'restarting', reason: err.message, timer: undefined, attempt: undefined };
    phase.timer = setTimeout(() => {
      if (this.#phase !== phase) return;
      phase.timer = undefined;
      this.#history.restarts++;
      phase.attempt = { proc: undefined, dead: false };
      this.#log.info('sidecar restart', { restarts: this.#history.restarts, ...this.#fields });
      void this.#launch(phase.attempt);
    }, delayMs);
    this.#enter(phase, { error: err.code, message: err.message, in_ms: delayMs, ...fields });
  }

  #fail(err: RfdetrError): void {
    this.#current()?.proc?.kill('SIGKILL');
    this.#enter({ state: 'failed', failure: err }, { error: err.code, message: err.message });
    for (const w of [...this.#calls.waiters]) w.reject(err);
  }

  async #close(): Promise<void> {
    const notReady = new RfdetrError('E_CLOSED', 'the backend was closed before the sidecar became ready');
    const before = this.#phase;
    if (before.state === 'restarting' && before.timer) clearTimeout(before.timer);
    for (const w of [...this.#calls.waiters]) w.reject(notReady);
    if (this.#calls.active > 0) {
      this.#log.info(`close: waiting for ${this.#calls.active} request(s) in flight (up to ${this.#closeT.drainMs} ms)`, this.#fields);
      const drained = new Promise<void>((r) => this.#calls.drained.push(r));
      if ((await withTimeout(drained, this.#closeT.drainMs)) === 'timeout') {
        this.#log.warn(`close: ${this.#calls.active} requests still running after ${this.#closeT.drainMs} ms; stopping anyway`, this.#fields);
      }
    }
    const p = this.#phase;
    if (p.state === 'stopped') return;  // destroyed meanwhile
    this.#leave(p);
    const closed = new RfdetrError('E_CLOSED', 'the backend was closed');
    const attempt = this.#current();
    if (attempt) attempt.dead = true;
    const proc = attempt?.proc;
    if (proc && proc.exitInfo === undefined) {
      // SIGTERM is the sidecar's clean stop (finish the forward, release the device, remove the socket, exit 0).
      let how = 'SIGTERM';
      proc.kill('SIGTERM');
      if ((await withTimeout(proc.exit, this.#closeT.termMs)) === 'timeout') {
        how = 'SIGKILL';
        this.#log.warn(`close: the sidecar ignored SIGTERM for ${this.#closeT.termMs} ms; sending SIGKILL`, this.#fields);
        proc.kill('SIGKILL');
        await withTimeout(proc.exit, this.#closeT.killMs);
      }
      this.#log.info('sidecar stopped', { how, exit: proc.exitInfo as ExitInfo | undefined, ...this.#fields });
    }
    if ('conn' in p) p.conn.close(closed);
    this.#enter({ state: 'stopped', failure: p.state === 'failed' ? p.failure : undefined }, this.#o.external ? { mode: 'external' } : {});
    this.#removeOwnedDir();
  }
}

/**
 * The backend HTTP and the CLI use: a supervised sidecar (spawned from sidecar/build/rfdetr-sidecar) or,
 * with `external: true`, a connection to a sidecar someone else runs. Starts at once; `await b.ready()`
 * to wait for the first READY, or just call infer() (it waits for readiness within its deadline).
 */
export function createBackend(opts: SidecarBackendOptions): SidecarBackend {
  return new SidecarBackend(opts);
}
