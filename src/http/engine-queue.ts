// The per-engine queue: decoded images wait here for the one engine, served by a cost-aware fair share across
// clients (virtual-time.ts): the next forward goes to the waiting client that has had the least engine time
// (ties: the one served longest ago, then whose head has waited longest), and each client's own images go in
// arrival order; with one client it is plain FIFO. The clocks and turns live in a FairShare (fair-share.ts) that
// every model's queue shares, so engine time spent on one model counts when the client competes on another. A job's engine time is what it held the engine for: from its
// dispatch, or from the previous job's end if that came later (the sidecar runs one forward at a time, in
// order), to its own end; its client is charged an estimate (its last job's time) at dispatch, so a client
// with a forward in flight is not picked again as if it had none, and the measured time replaces it at the end.
// At most `maxInFlight` requests are handed to the sidecar at a time: 2 by default, so the sidecar can read
// (on tt: resize) request N+1 while request N is on the engine; a request that is still here when its client
// leaves or its deadline passes is dropped without ever costing a forward. A forward already handed to the
// backend cannot be taken back: its caller is answered at once (504 / gone), but the engine slot stays busy
// until the backend settles, so the busy time and the next dispatch stay honest.
import { RfdetrError } from '../errors.ts';
import type { InferenceBackend, InferInput, InferResult, RowSelect } from '../sidecar/backend.ts';
import { FairShare } from './fair-share.ts';

export interface EngineJobOptions {
  /** Aborted when the client goes away. */
  signal: AbortSignal;
  /** Absolute deadline on the performance.now() clock. */
  deadlineAt: number;
  /** The configured deadline, for messages. */
  deadlineMs: number;
  /** Who sent it (fair share); default: one anonymous client. */
  client?: string;
  /** Called once, when the job is handed to the backend. */
  onStart?: () => void;
  /** The rows a selected output carries (InferOptions.select). */
  select?: RowSelect;
}

export interface EngineRun extends InferResult {
  /** Time spent waiting in this queue before the backend was called. */
  queueMs: number;
}

interface Waiting {
  seq: number;
  client: string;
  input: InferInput;
  opts: EngineJobOptions;
  enqueuedAt: number;
  resolve: (r: EngineRun) => void;
  reject: (e: Error) => void;
  settled: boolean;
  cleanup: () => void;
}

/**
 * The largest frame handed to the sidecar while another forward is in flight: 16 MiB of RGB (a 2560×2048
 * image). An 8192² image's 201 MB frame took 0.6–4.9 s to transfer under load on this 2-core host
 * (bench/redteam), and a small request pipelined behind it waited all of that ("send") plus its forward.
 */
export const PIPELINE_MAX_FRAME_BYTES = 16 * 1024 * 1024;

function frameBytes(input: InferInput): number {
  // From the sides: an image decoded into a slot file reads its `data` back only when asked. A file the sidecar
  // decodes is sent as it is: its frame is the file's bytes (its decode is engine time, charged as such).
  if ('encoded' in input) return input.encoded.bytes.byteLength;
  return 'image' in input ? input.image.width * input.image.height * 3 : input.pixelValues.length * 4;
}

export function deadlineError(deadlineMs: number, where: string): RfdetrError {
  return new RfdetrError(
    'E_DEADLINE',
    `the request did not finish within its ${deadlineMs} ms deadline (it was ${where}): retry later, send fewer concurrent requests, or raise --deadline-ms`,
    { deadline_ms: deadlineMs },
  );
}

export function abortedError(where: string): RfdetrError {
  return new RfdetrError('E_ABORTED', `the client closed the connection while the request was ${where}`);
}

export class EngineQueue {
  private readonly lines = new Map<string, Waiting[]>();
  private readonly runningBy = new Map<string, number>();
  private waitingCount = 0;
  private seq = 0;
  /** Each client's last job's engine time, ms: the estimate charged when its next job is dispatched. */
  private readonly lastCost = new Map<string, number>();
  /** When the last job to finish finished (performance.now()). */
  private lastEndAt = -Infinity;
  private running = 0;
  private busySince = 0;
  private busyAccumMs = 0;
  private forwards = 0;
  private idleWaiters: Array<() => void> = [];

  constructor(
    private readonly backend: InferenceBackend,
    private readonly maxInFlight = 2,
    /** The fair share this queue takes part in (the server's one, shared by every model); default: its own. */
    private readonly share = new FairShare(),
  ) {}

  /** Jobs waiting for the engine (not yet handed to the backend). */
  get depth(): number {
    return this.waitingCount;
  }

  /** Forwards handed to the backend and not yet settled. */
  get inFlight(): number {
    return this.running;
  }

  /** Backend calls made so far. */
  get forwardCount(): number {
    return this.forwards;
  }

  /** Total ms during which at least one request was in the sidecar (up to now). */
  busyMs(now = performance.now()): number {
    return this.busyAccumMs + (this.running > 0 ? now - this.busySince : 0);
  }

  /**
   * Charges `client` `ms` of work it cost the server's shared cores outside the engine (its body's parse, its
   * decode): on a 2-core host that time is taken from the forwards (an 8192² PNG's decode 0.3 s against 20–50 ms
   * for a 640×480 one, bench/redteam), so it counts against the client's share of the engine. A client that is
   * behind the others' clocks when its work arrives starts level with them anyway (virtual-time.ts).
   */
  charge(client: string, ms: number): void {
    if (ms > 0) this.share.charge(client, ms);
  }

  /** `client`'s engine time so far on this queue's fair share (every model's, in a server), ms. */
  engineTimeOf(client: string): number {
    return this.share.of(client);
  }

  /** Resolves once nothing is waiting and nothing is in flight. */
  idle(): Promise<void> {
    if (this.waitingCount === 0 && this.running === 0) return Promise.resolve();
    return new Promise((r) => this.idleWaiters.push(r));
  }

  run(input: InferInput, opts: EngineJobOptions): Promise<EngineRun> {
    return new Promise<EngineRun>((resolve, reject) => {
      const now = performance.now();
      if (opts.signal.aborted) return reject(abortedError('waiting for the engine'));
      if (now >= opts.deadlineAt) return reject(deadlineError(opts.deadlineMs, 'waiting for the engine'));
      const client = opts.client ?? '';
      const job: Waiting = { seq: this.seq++, client, input, opts, enqueuedAt: now, resolve, reject, settled: false, cleanup: () => {} };
      const drop = (err: Error) => {
        const line = this.lines.get(client);
        const i = line ? line.indexOf(job) : -1;
        if (i < 0) return; // already dispatched: the dispatch path answers
        line!.splice(i, 1);
        if (line!.length === 0) this.lines.delete(client);
        this.waitingCount--;
        this.left(client);
        this.settle(job, err);
        this.changed();
      };
      const onAbort = () => drop(abortedError('waiting for the engine'));
      const timer = setTimeout(() => drop(deadlineError(opts.deadlineMs, `waiting for the engine with ${this.waitingCount - 1} other image(s) waiting`)), opts.deadlineAt - now);
      opts.signal.addEventListener('abort', onAbort, { once: true });
      job.cleanup = () => {
        clearTimeout(timer);
        opts.signal.removeEventListener('abort', onAbort);
      };
      this.share.arrive(client);
      let line = this.lines.get(client);
      if (!line) this.lines.set(client, (line = []));
      line.push(job);
      this.waitingCount++;
      this.changed();
      this.pump();
    });
  }

  /** Rejects every waiting job (not the ones in flight) with `err`. */
  rejectWaiting(err: Error): void {
    const jobs = [...this.lines.values()].flat();
    this.lines.clear();
    this.waitingCount = 0;
    for (const job of jobs) this.left(job.client);
    for (const job of jobs) this.settle(job, err);
    this.changed();
  }

  private settle(job: Waiting, result: EngineRun | Error): void {
    if (job.settled) return;
    job.settled = true;
    job.cleanup();
    if (result instanceof Error) job.reject(result);
    else job.resolve(result);
  }

  private changed(): void {
    if (this.waitingCount === 0 && this.running === 0 && this.idleWaiters.length > 0) {
      for (const w of this.idleWaiters.splice(0)) w();
    }
  }

  private pump(): void {
    while (this.running < this.maxInFlight && this.waitingCount > 0) {
      const job = this.pick();
      // A large frame is handed over only to an idle engine: queued behind a forward it would hold the socket
      // and the sidecar's line for seconds, and whoever comes next would wait behind it.
      if (this.running > 0 && frameBytes(job.input) > PIPELINE_MAX_FRAME_BYTES) return;
      this.dispatch(this.take(job));
    }
  }

  private isActive(client: string): boolean {
    return this.lines.has(client) || this.runningBy.has(client);
  }

  /** One of `client`'s jobs left this queue (the share decides whether the client is idle everywhere). */
  private left(client: string): void {
    this.share.leave(client);
    if (this.lastCost.size > 4096) for (const c of this.lastCost.keys()) if (!this.isActive(c)) this.lastCost.delete(c);
  }

  /** The head of the waiting client with the least engine time (ties: served longest ago, then waiting longest). */
  private pick(): Waiting {
    let best: Waiting | undefined;
    let key: [number, number, number] = [Infinity, Infinity, Infinity];
    for (const [client, line] of this.lines) {
      const head = line[0]!;
      const k: [number, number, number] = [this.share.of(client), this.share.lastServed(client), head.seq];
      if (k[0] < key[0] || (k[0] === key[0] && (k[1] < key[1] || (k[1] === key[1] && k[2] < key[2])))) {
        best = head;
        key = k;
      }
    }
    return best!;
  }

  /** Takes `best` (the pick) out of its client's line. */
  private take(best: Waiting): Waiting {
    const line = this.lines.get(best.client)!;
    line.shift();
    if (line.length === 0) this.lines.delete(best!.client);
    this.waitingCount--;
    this.share.served(best.client);
    return best!;
  }

  private dispatch(job: Waiting): void {
    const start = performance.now();
    const queueMs = start - job.enqueuedAt;
    if (this.running === 0) this.busySince = start;
    this.running++;
    this.runningBy.set(job.client, (this.runningBy.get(job.client) ?? 0) + 1);
    const estimate = this.lastCost.get(job.client) ?? 0;
    this.share.charge(job.client, estimate);
    this.forwards++;
    job.opts.onStart?.();
    // The waiting-phase timer and abort listener are replaced by in-flight ones: the caller is answered at
    // once, the slot is released only when the backend settles.
    job.cleanup();
    const { signal, deadlineAt, deadlineMs } = job.opts;
    const onAbort = () => this.settle(job, abortedError('in the engine'));
    const timer = setTimeout(() => this.settle(job, deadlineError(deadlineMs, 'in the engine')), Math.max(0, deadlineAt - start));
    signal.addEventListener('abort', onAbort, { once: true });
    job.cleanup = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
    };
    this.changed();
    let p: Promise<InferResult>;
    try {
      p = this.backend.infer(job.input, { signal, deadlineMs: Math.max(1, deadlineAt - start), ...(job.opts.select ? { select: job.opts.select } : {}) });
    } catch (e) {
      p = Promise.reject(e);
    }
    p.then(
      (r) => this.settle(job, { ...r, queueMs }),
      (e: unknown) => this.settle(job, e instanceof Error ? e : new Error(String(e))),
    ).finally(() => {
      const end = performance.now();
      const cost = Math.max(0, end - Math.max(start, this.lastEndAt));
      this.lastEndAt = Math.max(this.lastEndAt, end);
      this.share.charge(job.client, cost - estimate);
      this.lastCost.set(job.client, cost);
      this.running--;
      const left = (this.runningBy.get(job.client) ?? 1) - 1;
      if (left === 0) this.runningBy.delete(job.client);
      else this.runningBy.set(job.client, left);
      this.left(job.client);
      if (this.running === 0) this.busyAccumMs += end - this.busySince;
      this.changed();
      this.pump();
    });
  }
}
