// One /predict request's timeline: a monotonic timestamp (performance.now(), CLOCK_MONOTONIC underneath) at
// every hand-off, from the request's arrival to the last byte of the answer handed to the kernel. Stages are
// the intervals between consecutive marks, so they add up to the request's whole time by construction and
// no time falls between two of them; a mark a request never reaches (an error, a batch) is skipped and the
// next stage starts at the previous mark that was set. Two figures overlap the stages instead of adding to
// them: the GC pauses (PerformanceObserver 'gc') and the event loop's delay (a probe timer's lateness)
// that fell inside the request's span. The stages up to the serialised body go out as the `Server-Timing`
// header (RFC-style `name;dur=ms`, read by browsers' devtools and curl users); the complete record, with the
// write of the answer, is handed to `onTimeline` once the response has finished.
import { PerformanceObserver } from 'node:perf_hooks';

/** The marks in the order a request passes them, each with the name of the stage that ends at it. */
export const MARKS = [
  ['body_first', 'wait-body'], //          the first chunk of the body was read from the socket
  ['body_end', 'receive'], //              its last chunk
  ['parsed', 'parse'], //                  image bytes and fields out of the body (JSON + base64, multipart, raw)
  ['decode_started', 'decode-wait'], //    a decode slot was free (sharp's work runs in libuv's pool)
  ['decode_header', 'decode-header'], //   sharp read the header; the pixels' bytes are reserved next
  ['decode_reserved', 'pixel-wait'], //    the pixel budget had room
  ['decode_done', 'decode'], //            the RGB pixels are in memory
  ['engine_queued', 'admit'], //           handed to the engine queue
  ['dispatched', 'engine-wait'], //        the queue gave it to the sidecar client
  ['frame_written', 'send'], //            the whole infer frame was handed to the kernel
  ['reply_read', 'sidecar'], //            the reply frame was read (split below into the sidecar's own figures: its decode, if it decoded the file, its resize and forward)
  ['forward_done', 'reply'], //            the reply decoded and back in the detector
  ['postprocessed', 'postprocess'], //     detections out of logits and boxes
  ['serialised', 'serialise'], //          the response body as JSON text (return_image's drawing included)
  ['finished', 'write'], //                the last byte handed to the kernel
] as const;
export type Mark = (typeof MARKS)[number][0];
const MARK_INDEX = new Map<Mark, number>(MARKS.map(([m], i) => [m, i]));

/**
 * The sidecar's share of the `sidecar` stage: its own decode (a file it decoded, `sidecar-decode`), resize and
 * forward times; the rest is `sidecar-io`.
 */
export interface SidecarSplit {
  decodeMs?: number | undefined;
  preprocessMs: number;
  forwardMs: number;
}

/** One finished request, for the bench and tests: absolute marks and the stages between them, in ms. */
export interface TimelineRecord {
  /** performance.now() at arrival (the request's headers parsed). */
  start: number;
  /** Absolute performance.now() of every mark reached. */
  marks: Partial<Record<Mark, number>>;
  /** [name, ms] in order; their sum is `total`. */
  stages: Array<[string, number]>;
  total: number;
  /** GC pauses inside the request's span, ms, and how many. */
  gcMs: number;
  gcCount: number;
  /** Event-loop delay inside the request's span (probe lateness beyond its PROBE_MS period), ms. */
  loopDelayMs: number;
  /** Body form and HTTP status, for grouping. */
  form?: string;
  status?: number;
}

const round3 = (x: number) => Math.round(x * 1000) / 1000;

export class Timeline {
  readonly start: number;
  readonly #marks: Array<number | undefined> = new Array(MARKS.length);
  #sidecar: SidecarSplit | undefined;
  #end: number | undefined;
  gcMs = 0;
  gcCount = 0;
  loopDelayMs = 0;
  form: string | undefined;

  constructor(start: number) {
    this.start = start;
  }

  /** Sets `mark` to `at` (default now), once: the first call wins, so a retry or a batch's later image does not move it. */
  mark(mark: Mark, at = performance.now()): void {
    const i = MARK_INDEX.get(mark)!;
    if (this.#marks[i] === undefined) this.#marks[i] = at;
  }

  has(mark: Mark): boolean {
    return this.#marks[MARK_INDEX.get(mark)!] !== undefined;
  }

  sidecar(split: SidecarSplit): void {
    this.#sidecar = split;
  }

  /** Overlap of [from, to] with the request's span so far (open-ended until it finished). */
  overlap(from: number, to: number): number {
    const end = this.#end ?? Infinity;
    return Math.max(0, Math.min(to, end) - Math.max(from, this.start));
  }

  get ended(): boolean {
    return this.#end !== undefined;
  }

  end(at: number): void {
    this.#end ??= at;
  }

  /** The stages up to the last mark set, in order. Marks out of order (clock hops between callbacks) are clamped. */
  stages(): Array<[string, number]> {
    const out: Array<[string, number]> = [];
    let prev = this.start;
    for (let i = 0; i < MARKS.length; i++) {
      const at = this.#marks[i];
      if (at === undefined) continue;
      const t = Math.max(prev, at);
      const name = MARKS[i]![1];
      if (name === 'sidecar' && this.#sidecar) {
        const span = t - prev;
        const { decodeMs } = this.#sidecar;
        const dec = Math.min(span, decodeMs ?? 0);
        const pre = Math.min(span - dec, this.#sidecar.preprocessMs);
        const fwd = Math.min(span - dec - pre, this.#sidecar.forwardMs);
        if (decodeMs !== undefined) out.push(['sidecar-decode', dec]);
        out.push(['preprocess', pre], ['inference', fwd], ['sidecar-io', span - dec - pre - fwd]);
      } else {
        out.push([name, t - prev]);
      }
      prev = t;
    }
    return out;
  }

  /** The `Server-Timing` header value: every stage so far, then `total`, `gc` and `loop-delay` (these two overlap the stages). */
  header(): string {
    const stages = this.stages();
    const total = stages.reduce((n, [, ms]) => n + ms, 0);
    const parts = stages.map(([name, ms]) => `${name};dur=${round3(ms)}`);
    parts.push(`total;dur=${round3(total)}`);
    parts.push(`gc;dur=${round3(this.gcMs)};desc="GC pauses within the stages"`);
    parts.push(`loop-delay;dur=${round3(this.loopDelayMs)};desc="event-loop delay within the stages"`);
    return parts.join(', ');
  }

  record(status?: number): TimelineRecord {
    const stages = this.stages();
    const marks: Partial<Record<Mark, number>> = {};
    MARKS.forEach(([m], i) => {
      if (this.#marks[i] !== undefined) marks[m] = this.#marks[i];
    });
    return {
      start: this.start, marks, stages, total: stages.reduce((n, [, ms]) => n + ms, 0),
      gcMs: this.gcMs, gcCount: this.gcCount, loopDelayMs: this.loopDelayMs, form: this.form, status,
    };
  }
}

/**
 * The probe timer's period, ms; lateness beyond it is the loop's delay. 5 ms: at 1 ms the probe cost 4.5 % of
 * a core on this loaded 2-core host during a 3 s forward (bench/server, cpu engine); at 5 ms a block shorter
 * than the period can go unseen, which the ≤ 10 ms delay the server is held to does not need.
 */
export const PROBE_MS = 5;

/**
 * The requests in flight, and the two observers that charge GC pauses and event-loop delay to them. The
 * probe timer runs only while a request is in flight.
 */
export class Timelines {
  readonly #active = new Set<Timeline>();
  #gc: PerformanceObserver | undefined;
  #probe: NodeJS.Timeout | undefined;
  #due = 0;
  readonly #now: () => number;

  /** `now` is the probe's clock (tests give a fake one to make the loop's delay exact). */
  constructor(now: () => number = () => performance.now()) {
    this.#now = now;
  }

  begin(start: number): Timeline {
    const t = new Timeline(start);
    this.#active.add(t);
    if (!this.#gc) {
      this.#gc = new PerformanceObserver((list) => {
        for (const e of list.getEntries()) this.#charge(e.startTime, e.startTime + e.duration, 'gc');
      });
      this.#gc.observe({ entryTypes: ['gc'] });
    }
    if (!this.#probe) this.#arm();
    return t;
  }

  /**
   * Ends `t` at `at`; `done` is called a turn later, so that GC entries of its last moments (the observer is
   * told of them asynchronously) are charged first.
   */
  finish(t: Timeline, at: number, done: () => void): void {
    t.end(at);
    setImmediate(() => {
      this.#active.delete(t);
      if (this.#active.size === 0) this.#disarm();
      done();
    });
  }

  close(): void {
    this.#disarm();
    this.#gc?.disconnect();
    this.#gc = undefined;
  }

  #charge(from: number, to: number, what: 'gc' | 'loop'): void {
    for (const t of this.#active) {
      const ms = t.overlap(from, to);
      if (ms <= 0) continue;
      if (what === 'gc') (t.gcMs += ms), t.gcCount++;
      else t.loopDelayMs += ms;
    }
  }

  #arm(): void {
    this.#due = this.#now() + PROBE_MS;
    this.#probe = setTimeout(() => {
      const now = this.#now();
      const late = now - this.#due;
      if (late > 0) this.#charge(now - late, now, 'loop');
      this.#probe = undefined;
      if (this.#active.size > 0) this.#arm();
    }, PROBE_MS);
    this.#probe.unref();
  }

  #disarm(): void {
    if (this.#probe) clearTimeout(this.#probe);
    this.#probe = undefined;
  }
}
