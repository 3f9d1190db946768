// The supervised sidecar: spawns rfdetr-sidecar (execa), waits for its READY line, connects, checks the
// hello, pings it, and restarts it with exponential backoff when it dies; more than `maxCrashes` deaths in
// `windowMs` → state `failed`. A sidecar that exits before READY with its documented startup-failure (1) or
// usage (2) status is not restarted: the same flags and files would fail the same way, so the backend fails at
// once with the sidecar's own message. A clean exit (0) while serving (it was told to stop by someone else) is
// restarted without counting as a crash. External mode connects to a sidecar someone else runs (systemd) and
// reconnects with the same backoff and cap instead of spawning (failed → the server exits non-zero and systemd
// restarts it). States: starting → ready → restarting → ready … | failed | stopped; every transition is
// logged. close() drains, then SIGTERM → SIGKILL, each with a deadline; destroy(err) rejects everything at once.
import { execa, type ResultPromise } from 'execa';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { packageRoot, sidecarBinary } from '../config/paths.ts';
import { RfdetrError, isRfdetrError } from '../errors.ts';
import type { BackendState, InferenceBackend, InferInput, InferOptions, InferResult, SidecarInfo } from './backend.ts';
import { SidecarConnection } from './client.ts';

export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
}

export const silentLogger: Logger = { debug() {}, info() {}, warn() {}, error() {} };

export interface SidecarBackendOptions {
  /** Engine name passed to the sidecar (`--engine`); default `cpu`. */
  engine?: string;
  /** Directory with model.safetensors + config.json (`--weights`); required unless `external`. */
  weightsDir?: string;
  /** `--threads` (0 = physical cores). */
  threads?: number;
  /** `--device-id` for accelerator engines. */
  deviceId?: number;
  /** `--precision`: fp32 | bf16 (tt-host) | int8 (cpu). */
  precision?: 'fp32' | 'bf16' | 'int8';
  /** Socket path: where the spawned sidecar listens (default: a fresh 0700 temp dir), or the external sidecar's socket. */
  socketPath?: string;
  /** Connect to an existing sidecar at `socketPath` (e.g. a systemd unit); never spawn. */
  external?: boolean;
  /** The executable and leading arguments (default: sidecarBinary()); tests point this at a scripted fake. */
  command?: { file: string; args?: string[] };
  /** Extra environment for the sidecar process. */
  env?: Record<string, string | undefined>;
  logger?: Logger;
  /** Spawn → READY → hello, and the external hello wait. Default 300 000 (loading real weights on a slow disk). */
  startupTimeoutMs?: number;
  /** Per-request deadline when InferOptions.deadlineMs is not given. Default 60 000. */
  defaultDeadlineMs?: number;
  /** Liveness pings; after `maxMissedPings` unanswered in a row the sidecar is killed and restarted. */
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

interface ExitInfo {
  exitCode: number | undefined;
  signal: string | undefined;
}

type ResolvedOptions = SidecarBackendOptions & {
  engine: string; external: boolean; logger: Logger; startupTimeoutMs: number; defaultDeadlineMs: number;
  pingIntervalMs: number; pingTimeoutMs: number; maxMissedPings: number; stallMs: number; stderrTailLines: number;
};

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

/** Socket directories are named rfdetr-sidecar-<pid>-XXXXXX so that a later process can tell a dead owner's. */
const SOCKET_DIR_PREFIX = 'rfdetr-sidecar-';

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Removes socket directories left in `tmp` by supervisors that died without closing (SIGKILL, OOM): the sidecar
 * removes its socket when it stops, not the directory. Only directories whose owner pid is gone, and that hold
 * nothing but (at most) the socket, are removed.
 */
export function sweepStaleSocketDirs(tmp: string = os.tmpdir()): string[] {
  const removed: string[] = [];
  let names: string[];
  try {
    names = readdirSync(tmp);
  } catch {
    return removed;
  }
  for (const name of names) {
    const m = /^rfdetr-sidecar-(\d+)-[A-Za-z0-9]{6}$/.exec(name);
    if (!m || Number(m[1]) === process.pid || pidAlive(Number(m[1]))) continue;
    const dir = path.join(tmp, name);
    try {
      if (statSync(dir).uid !== process.getuid?.()) continue;
      if (!readdirSync(dir).every((e) => e === 'sidecar.sock')) continue;
      rmSync(dir, { recursive: true, force: true });
      removed.push(dir);
    } catch {
      // Gone meanwhile, or not ours to read: leave it.
    }
  }
  return removed;
}

const packageVersion = (JSON.parse(readFileSync(path.join(packageRoot, 'package.json'), 'utf8')) as { version: string }).version;

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T | 'timeout'> {
  let t: NodeJS.Timeout;
  return Promise.race([p, new Promise<'timeout'>((r) => { t = setTimeout(() => r('timeout'), ms); })]).finally(() => clearTimeout(t));
}

export class SidecarBackend implements InferenceBackend {
  #state: BackendState = 'starting';
  #info: SidecarInfo | null = null;
  #failure: RfdetrError | undefined;
  readonly #o: ResolvedOptions;
  readonly #log: Logger;
  readonly #restart: Required<NonNullable<SidecarBackendOptions['restart']>>;
  readonly #closeT: Required<NonNullable<SidecarBackendOptions['closeTimeouts']>>;
  readonly #socketPath: string;
  readonly #ownedDir: string | undefined;
  #gen = 0;
  #deadGen = 0;
  #child: ResultPromise | undefined;
  #childExit: Promise<ExitInfo> | undefined;
  #exitInfo: ExitInfo | undefined;
  #conn: SidecarConnection | undefined;
  #stderrTail: string[] = [];
  #crashes: number[] = [];
  #restarts = 0;
  #restartTimer: NodeJS.Timeout | undefined;
  #failureReason: string | null = null;
  #pingTimer: NodeJS.Timeout | undefined;
  #pinging = false;
  #missedPings = 0;
  #waiters = new Set<Waiter>();
  #active = 0;
  #drainWaiters: (() => void)[] = [];
  #closing = false;
  #closePromise: Promise<void> | undefined;
  #listeners = new Set<(state: BackendState, prev: BackendState) => void>();

  constructor(opts: SidecarBackendOptions) {
    if (opts.external && !opts.socketPath) {
      throw new RfdetrError('E_USAGE', 'external mode needs socketPath: the socket of the sidecar to connect to');
    }
    if (!opts.external && !opts.weightsDir) {
      throw new RfdetrError('E_USAGE', 'weightsDir is required to spawn a sidecar (a directory with model.safetensors and config.json)');
    }
    this.#o = {
      engine: 'cpu', external: false, logger: silentLogger, startupTimeoutMs: 300_000, defaultDeadlineMs: 60_000,
      pingIntervalMs: 5_000, pingTimeoutMs: 2_000, maxMissedPings: 2, stallMs: 300_000, stderrTailLines: 20,
      ...Object.fromEntries(Object.entries(opts).filter(([, v]) => v !== undefined)),
    } as ResolvedOptions;
    this.#log = this.#o.logger;
    this.#restart = { initialDelayMs: 250, maxDelayMs: 10_000, maxCrashes: 5, windowMs: 180_000, ...opts.restart };
    this.#closeT = { drainMs: 30_000, termMs: 5_000, killMs: 2_000, ...opts.closeTimeouts };
    if (opts.socketPath) {
      this.#socketPath = opts.socketPath;
    } else {
      const swept = sweepStaleSocketDirs();
      if (swept.length) this.#log.info('removed socket directories left by exited processes', { dirs: swept });
      this.#ownedDir = mkdtempSync(path.join(os.tmpdir(), `${SOCKET_DIR_PREFIX}${process.pid}-`));
      this.#socketPath = path.join(this.#ownedDir, 'sidecar.sock');
    }
    this.#log.info(`sidecar state → starting`, { mode: this.#o.external ? 'external' : 'spawn', socket: this.#socketPath });
    void this.#launch();
  }

  get state(): BackendState {
    return this.#state;
  }

  get info(): SidecarInfo | null {
    return this.#info;
  }

  /** The error that put the backend in `failed` (or was passed to destroy). */
  get failure(): RfdetrError | undefined {
    return this.#failure;
  }

  /** The current sidecar process id (spawn mode), for diagnostics and tests. */
  get pid(): number | undefined {
    return this.#child?.pid;
  }

  get restarts(): number {
    return this.#restarts;
  }

  get failureReason(): string | null {
    return this.#failureReason;
  }

  get socketPath(): string {
    return this.#socketPath;
  }

  /** Calls `fn(state, previous)` on every transition; returns an unsubscribe function. */
  onStateChange(fn: (state: BackendState, prev: BackendState) => void): () => void {
    this.#listeners.add(fn);
    return () => this.#listeners.delete(fn);
  }

  /** Resolves when the backend is ready; rejects when it failed or was closed first (or after timeoutMs). */
  ready(timeoutMs?: number, signal?: AbortSignal): Promise<void> {
    if (this.#state === 'ready') return Promise.resolve();
    if (this.#state === 'failed') return Promise.reject(this.#failure);
    if (this.#state === 'stopped' || this.#closing) return Promise.reject(this.#closedError());
    return new Promise<void>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const done = () => {
        if (timer) clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        this.#waiters.delete(w);
      };
      const w: Waiter = { resolve: () => { done(); resolve(); }, reject: (e) => { done(); reject(e); } };
      const onAbort = () => w.reject(new RfdetrError('E_ABORTED', 'aborted while waiting for the sidecar to become ready'));
      if (timeoutMs !== undefined) {
        timer = setTimeout(() => w.reject(new RfdetrError('E_STARTING',
          `the sidecar was not ready within ${timeoutMs} ms (state ${this.#state})`, { state: this.#state })), Math.max(0, timeoutMs));
      }
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#waiters.add(w);
    });
  }

  async infer(input: InferInput, opts: InferOptions = {}): Promise<InferResult> {
    if (this.#closing || this.#state === 'stopped') throw this.#closedError();
    if (this.#state === 'failed') throw this.#failure!;
    const deadlineMs = opts.deadlineMs ?? this.#o.defaultDeadlineMs;
    const t0 = performance.now();
    this.#active++;
    try {
      if (this.#state !== 'ready' || !this.#conn) {
        try {
          await this.ready(deadlineMs, opts.signal);
        } catch (e) {
          if (isRfdetrError(e, 'E_STARTING')) {
            throw new RfdetrError('E_DEADLINE', `the request deadline of ${deadlineMs} ms passed while the sidecar was ${this.#state}`, { state: this.#state });
          }
          throw e;
        }
      }
      const conn = this.#conn!;
      return await conn.infer(input, { deadlineMs: deadlineMs - (performance.now() - t0), signal: opts.signal });
    } finally {
      this.#active--;
      if (this.#active === 0) for (const d of this.#drainWaiters.splice(0)) d();
    }
  }

  close(): Promise<void> {
    this.#closePromise ??= this.#close();
    return this.#closePromise;
  }

  destroy(err?: Error): void {
    const e = err ? (err instanceof RfdetrError ? err : new RfdetrError('E_CLOSED', `the backend was destroyed: ${err.message}`, undefined, { cause: err }))
      : new RfdetrError('E_CLOSED', 'the backend was destroyed');
    this.#closing = true;
    this.#failure ??= e;
    this.#failureReason = this.#failure.message;
    this.#stopTimers();
    for (const w of [...this.#waiters]) w.reject(e);
    this.#conn?.close(e);
    this.#conn = undefined;
    this.#child?.kill('SIGKILL');
    this.#setState('stopped', { reason: e.message });
    this.#removeOwnedDir();
  }

  // ---- internals -------------------------------------------------------------------------------------------

  #closedError(): RfdetrError {
    return new RfdetrError('E_CLOSED', 'the inference backend is closed; create a new one');
  }

  #setState(next: BackendState, fields: Record<string, unknown> = {}): void {
    const prev = this.#state;
    if (prev === next) return;
    this.#state = next;
    const log = next === 'failed' ? this.#log.error : next === 'restarting' ? this.#log.warn : this.#log.info;
    log.call(this.#log, `sidecar state ${prev} → ${next}`, fields);
    for (const l of this.#listeners) l(next, prev);
  }

  #stopTimers(): void {
    if (this.#restartTimer) clearTimeout(this.#restartTimer);
    if (this.#pingTimer) clearInterval(this.#pingTimer);
    this.#restartTimer = undefined;
    this.#pingTimer = undefined;
  }

  #removeOwnedDir(): void {
    if (this.#ownedDir) rmSync(this.#ownedDir, { recursive: true, force: true });
  }

  #sidecarArgs(): string[] {
    const o = this.#o;
    const args = ['--socket', this.#socketPath, '--engine', o.engine, '--weights', o.weightsDir!, '--exit-with-parent'];
    if (o.threads !== undefined) args.push('--threads', String(o.threads));
    if (o.deviceId !== undefined) args.push('--device-id', String(o.deviceId));
    if (o.precision !== undefined) args.push('--precision', o.precision);
    return args;
  }

  #exitError(exit: ExitInfo, when: 'before it was ready' | 'while serving', pid: number | undefined): RfdetrError {
    const how = exit.signal ? `was killed by ${exit.signal}` : `exited with code ${exit.exitCode}`;
    const tail = this.#stderrTail.slice(-5).join(' | ');
    return new RfdetrError('E_SIDECAR_EXITED', `the sidecar (pid ${pid}) ${how} ${when}${tail ? `; its last stderr: ${tail}` : ''}`, {
      exitCode: exit.exitCode, signal: exit.signal, pid, stderrTail: [...this.#stderrTail], phase: when === 'while serving' ? 'serving' : 'startup',
    });
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

  #spawn(gen: number): { child: ResultPromise; exit: Promise<ExitInfo> } {
    const cmd = this.#o.command ?? { file: sidecarBinary(), args: [] };
    const args = [...(cmd.args ?? []), ...this.#sidecarArgs()];
    this.#log.info('sidecar spawn', { file: cmd.file, args });
    this.#stderrTail = [];
    this.#exitInfo = undefined;
    const child = execa(cmd.file, args, {
      stdin: 'ignore', stdout: 'pipe', stderr: 'pipe', buffer: false, reject: false,
      // The inherited environment without Hub credentials, plus what the caller asked for.
      env: { ...sidecarEnvironment(process.env), ...this.#o.env }, extendEnv: false,
      // Its own process group: a terminal's Ctrl-C goes to the CLI, which then close()s the sidecar in order
      // (otherwise the sidecar would stop on the same SIGINT and be restarted). --exit-with-parent
      // (PR_SET_PDEATHSIG) still ends it if this process dies.
      detached: true,
    });
    let partial = '';
    child.stderr?.setEncoding('utf8');
    child.stderr?.on('data', (d: string) => {
      const lines = (partial + d).split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) {
        if (!line) continue;
        this.#stderrTail.push(line);
        if (this.#stderrTail.length > this.#o.stderrTailLines) this.#stderrTail.shift();
        this.#log.debug(`sidecar: ${line}`, { pid: child.pid });
      }
    });
    const exit = child.then(
      (r) => ({ exitCode: r.exitCode, signal: r.signal }),
      (e: { exitCode?: number; signal?: string }) => ({ exitCode: e.exitCode, signal: e.signal }),
    ).then((info) => {
      if (partial) this.#stderrTail.push(partial);
      this.#exitInfo = info;
      // While serving, the socket's EOF usually gets here first; whichever is first runs the one close path.
      // Before the connection exists, #waitReady / connect report the death (as a startup failure).
      if (gen === this.#gen && this.#conn) this.#conn.close(this.#exitError(info, 'while serving', child.pid));
      return info;
    });
    return { child, exit };
  }

  #waitReady(child: ResultPromise, exit: Promise<ExitInfo>): Promise<{ socket?: string }> {
    return new Promise((resolve, reject) => {
      let buf = '';
      let done = false;
      const finish = (f: () => void) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        child.stdout?.off('data', onData);
        f();
      };
      const timer = setTimeout(() => finish(() => {
        child.kill('SIGKILL');
        const tail = this.#stderrTail.slice(-5).join(' | ');
        reject(new RfdetrError('E_SIDECAR_EXITED',
          `the sidecar printed no READY line within ${this.#o.startupTimeoutMs} ms; killed it` +
          `${tail ? `; its last stderr: ${tail}` : ''}. Raise startupTimeoutMs if loading is this slow.`,
          { reason: 'startup-timeout', stderrTail: [...this.#stderrTail] }));
      }), this.#o.startupTimeoutMs);
      const onData = (d: Buffer | string) => {
        buf += d.toString();
        let nl: number;
        while ((nl = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, nl);
          buf = buf.slice(nl + 1);
          if (!line.startsWith('READY ')) {
            this.#log.warn('sidecar wrote to stdout before READY (ignored)', { line });
            continue;
          }
          let ready: { socket?: string };
          try {
            ready = JSON.parse(line.slice(6)) as { socket?: string };
          } catch {
            finish(() => reject(new RfdetrError('E_PROTOCOL', `the sidecar's READY line is not JSON: ${line.slice(0, 200)}`)));
            return;
          }
          this.#log.info('sidecar READY', ready as Record<string, unknown>);
          finish(() => resolve(ready));
          return;
        }
      };
      child.stdout?.on('data', onData);
      void exit.then((info) => finish(() => reject(this.#exitError(info, 'before it was ready', child.pid))));
    });
  }

  async #launch(): Promise<void> {
    const gen = ++this.#gen;
    let conn: SidecarConnection | undefined;
    try {
      const connectOpts = {
        helloTimeoutMs: this.#o.startupTimeoutMs,
        explainClose: (cause: RfdetrError) => this.#explainClose(gen, cause),
        onClosed: (err: RfdetrError) => this.#onDeath(gen, err),
      };
      if (this.#o.external) {
        conn = await SidecarConnection.connect(this.#socketPath, connectOpts);
      } else {
        const { child, exit } = this.#spawn(gen);
        this.#child = child;
        this.#childExit = exit;
        const ready = await this.#waitReady(child, exit);
        conn = await SidecarConnection.connect(ready.socket ?? this.#socketPath, connectOpts);
      }
    } catch (e) {
      const err = e instanceof RfdetrError ? e : new RfdetrError('E_SIDECAR_EXITED', `starting the sidecar failed: ${(e as Error).message}`, undefined, { cause: e });
      if (!this.#o.external && gen === this.#gen && this.#exitInfo === undefined && err.code !== 'E_SIDECAR_EXITED') {
        // Connected to nothing sensible (bad hello): the process is of no use.
        this.#child?.kill('SIGKILL');
      }
      this.#onDeath(gen, err);
      return;
    }
    if (gen !== this.#gen || this.#closing || this.#deadGen >= gen) {
      conn.close();
      return;
    }
    this.#conn = conn;
    this.#info = conn.info;
    if (conn.info.sidecarVersion !== packageVersion && !this.#o.external) {
      // Same protocol, different builds: it works, but a stale sidecar build is worth knowing about.
      this.#log.warn(`sidecar ${conn.info.sidecarVersion} differs from this package ${packageVersion}; rebuild with npm install`);
    }
    this.#missedPings = 0;
    this.#failureReason = null;
    this.#setState('ready', { engine: conn.info.engine, device: conn.info.device, sidecarVersion: conn.info.sidecarVersion, pid: this.#child?.pid });
    for (const w of [...this.#waiters]) w.resolve();
    this.#pingTimer = setInterval(() => void this.#healthCheck(gen), this.#o.pingIntervalMs);
    this.#pingTimer.unref();
  }

  /** For a spawned sidecar, a closed socket is explained by the process's exit (waited for briefly). */
  async #explainClose(gen: number, cause: RfdetrError): Promise<RfdetrError> {
    if (this.#o.external || gen !== this.#gen || !this.#childExit) return cause;
    if (cause.code !== 'E_SIDECAR_EXITED') {
      this.#child?.kill('SIGKILL');  // a sidecar that broke the protocol cannot be trusted with the next request
      return new RfdetrError(cause.code, cause.message, { ...cause.details, stderrTail: [...this.#stderrTail] });
    }
    const info = await withTimeout(this.#childExit, 500);
    if (info === 'timeout') {
      this.#child?.kill('SIGKILL');
      return new RfdetrError('E_SIDECAR_EXITED', `${cause.message}; the process did not exit, so it was killed`, { ...cause.details, stderrTail: [...this.#stderrTail] });
    }
    return this.#exitError(info, 'while serving', this.#child?.pid);
  }

  async #healthCheck(gen: number): Promise<void> {
    const conn = this.#conn;
    if (gen !== this.#gen || !conn || this.#pinging || this.#state !== 'ready') return;
    const stalled = conn.oldestInferMs();
    if (stalled > this.#o.stallMs) {
      this.#kill(gen, conn, new RfdetrError('E_SIDECAR_EXITED', `the sidecar has not answered an infer for ${Math.round(stalled)} ms (stallMs ${this.#o.stallMs}); killed it`, { reason: 'stalled' }));
      return;
    }
    this.#pinging = true;
    try {
      await conn.ping(this.#o.pingTimeoutMs);
      this.#missedPings = 0;
    } catch (e) {
      if (!isRfdetrError(e, 'E_DEADLINE') || gen !== this.#gen) return;
      this.#missedPings++;
      this.#log.warn(`sidecar missed a ping (${this.#missedPings}/${this.#o.maxMissedPings})`, { timeoutMs: this.#o.pingTimeoutMs });
      if (this.#missedPings >= this.#o.maxMissedPings) {
        this.#kill(gen, conn, new RfdetrError('E_SIDECAR_EXITED',
          `the sidecar missed ${this.#missedPings} pings of ${this.#o.pingTimeoutMs} ms; killed it`, { reason: 'unresponsive' }));
      }
    } finally {
      this.#pinging = false;
    }
  }

  #kill(gen: number, conn: SidecarConnection, err: RfdetrError): void {
    this.#log.error(err.message);
    if (!this.#o.external) this.#child?.kill('SIGKILL');
    conn.close(new RfdetrError(err.code, err.message, { ...err.details, stderrTail: [...this.#stderrTail] }));
    this.#onDeath(gen, err);
  }

  /** The one place a sidecar's death is handled (per generation): restart with backoff, or fail. */
  #onDeath(gen: number, err: RfdetrError): void {
    if (gen !== this.#gen || this.#deadGen >= gen) return;
    this.#deadGen = gen;
    this.#stopTimers();
    const conn = this.#conn;
    this.#conn = undefined;
    conn?.close(err);
    if (!this.#o.external && this.#exitInfo === undefined) this.#child?.kill('SIGKILL');
    if (this.#closing || this.#state === 'stopped' || this.#state === 'failed') return;

    if (err.code === 'E_VERSION_MISMATCH') {
      this.#fail(err);  // restarting the same binary cannot fix it
      return;
    }
    const startup = this.#startupFailure(err);
    if (startup) {
      this.#fail(startup);
      return;
    }
    this.#failureReason = err.message;
    if (!this.#o.external && err.details?.phase === 'serving' && err.details.exitCode === 0 && !err.details.signal) {
      // A clean stop we did not ask for (a shutdown op from another client of the socket): not a crash.
      this.#setState('restarting', { error: err.code, message: err.message, crash: false });
      this.#log.warn('the sidecar stopped cleanly without being asked to; restarting it (not counted as a crash)', { message: err.message });
      this.#scheduleRestart(this.#restart.initialDelayMs);
      return;
    }
    const now = performance.now();
    this.#crashes = this.#crashes.filter((t) => now - t < this.#restart.windowMs);
    this.#crashes.push(now);
    if (this.#crashes.length > this.#restart.maxCrashes) {
      this.#fail(new RfdetrError('E_SIDECAR_FAILED',
        `the sidecar crashed ${this.#crashes.length} times in the last ${Math.round(this.#restart.windowMs / 1000)} s; not restarting. ` +
        `Last failure: ${err.message}`, { ...err.details, crashes: this.#crashes.length, lastError: err.code }, { cause: err }));
      return;
    }
    const backoff = Math.min(this.#restart.maxDelayMs, this.#restart.initialDelayMs * 2 ** (this.#crashes.length - 1));
    this.#setState('restarting', { error: err.code, message: err.message });
    this.#log.warn(`sidecar restart scheduled`, { inMs: backoff, crashes: this.#crashes.length, error: err.code, message: err.message });
    this.#scheduleRestart(backoff);
  }

  #scheduleRestart(delayMs: number): void {
    this.#restartTimer = setTimeout(() => {
      this.#restartTimer = undefined;
      this.#restarts++;
      void this.#launch();
    }, delayMs);
  }

  #fail(err: RfdetrError): void {
    this.#failure = err;
    this.#failureReason = err.message;
    this.#child?.kill('SIGKILL');
    this.#setState('failed', { error: err.code, message: err.message });
    for (const w of [...this.#waiters]) w.reject(err);
  }

  async #close(): Promise<void> {
    this.#closing = true;
    if (this.#restartTimer) clearTimeout(this.#restartTimer);
    const notReady = new RfdetrError('E_CLOSED', 'the backend was closed before the sidecar became ready');
    for (const w of [...this.#waiters]) w.reject(notReady);
    if (this.#active > 0) {
      const drained = new Promise<void>((r) => this.#drainWaiters.push(r));
      if ((await withTimeout(drained, this.#closeT.drainMs)) === 'timeout') {
        this.#log.warn(`close: ${this.#active} requests still running after ${this.#closeT.drainMs} ms; stopping anyway`);
      }
    }
    this.#stopTimers();
    const conn = this.#conn;
    const closed = new RfdetrError('E_CLOSED', 'the backend was closed');
    if (this.#o.external) {
      conn?.close(closed);
      this.#setState('stopped', { mode: 'external' });
      return;
    }
    const child = this.#child;
    const exit = this.#childExit;
    if (child && exit && this.#exitInfo === undefined) {
      // SIGTERM is the sidecar's clean stop (finish the forward, release the device, remove the socket, exit 0).
      let how = 'SIGTERM';
      child.kill('SIGTERM');
      if ((await withTimeout(exit, this.#closeT.termMs)) === 'timeout') {
        how = 'SIGKILL';
        this.#log.warn(`close: the sidecar ignored SIGTERM for ${this.#closeT.termMs} ms; sending SIGKILL`);
        child.kill('SIGKILL');
        await withTimeout(exit, this.#closeT.killMs);
      }
      this.#log.info('sidecar stopped', { how, exit: this.#exitInfo as ExitInfo | undefined });
    }
    conn?.close(closed);
    this.#setState('stopped');
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
