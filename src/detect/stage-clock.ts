// One frame's stage clock: the readings (performance.now(), monotonic) its detector takes at each hand-off. Both
// of the frame's timing reports come from these same readings: its `timing_ms` (the decode and waiting figures
// it hands the pipeline, pipeline.ts detectDecoded) and, for a request that has a timeline, the marks of its
// Server-Timing header (src/http/timeline.ts, which implements StageMarks). So `decode-header` + `decode` in
// Server-Timing is `timing_ms.decode`, and `timing_ms.total` ends at the `postprocessed` mark, by construction.
import type { PredictTiming } from './pipeline.ts';

/** The hand-offs a frame passes in its detector, in order (a subset of the request timeline's marks). */
export type StageMark = 'decode_started' | 'decode_header' | 'decode_reserved' | 'decode_done' | 'engine_queued' | 'dispatched' | 'frame_written' | 'reply_read' | 'forward_done' | 'postprocessed';

/** Where a clock's marks go (a request's timeline). */
export interface StageMarks {
  mark(mark: StageMark, at: number): void;
  sidecar(split: { decodeMs?: number | undefined; preprocessMs: number; forwardMs: number }): void;
}

/** What the forward reports of itself (the engine queue's run, a backend's infer). */
export interface ForwardReadings {
  queueMs?: number;
  frameWrittenAt?: number;
  replyReadAt?: number;
  decodeMs?: number;
  preprocessMs: number;
  forwardMs: number;
}

export class StageClock {
  /** When the frame's work started (a request's arrival): timing_ms.total counts from here. */
  readonly t0: number;
  readonly #marks: StageMarks | undefined;
  #waitFrom: number;
  #decodeFrom: number;
  #reservedMs = 0;
  #decodedAt: number | undefined;
  #redecodeMs = 0;
  #elsewhereMs = 0;

  /** `t0`: the frame's start; `marks`: a timeline to mark too (none: timing_ms only). */
  constructor(t0: number, marks?: StageMarks) {
    this.t0 = t0;
    this.#marks = marks;
    this.#waitFrom = t0;
    this.#decodeFrom = t0;
  }

  /** The frame starts waiting for its decode (a slot). */
  waiting(at = performance.now()): void {
    this.#waitFrom = at;
    this.#decodeFrom = at;
  }

  /** Its decode starts (a slot was free). */
  decodeStarted(at = performance.now()): void {
    this.#decodeFrom = at;
    this.#marks?.mark('decode_started', at);
  }

  /** Its header was read: its pixels' reservation starts. */
  headerRead(at = performance.now()): number {
    this.#marks?.mark('decode_header', at);
    return at;
  }

  /** Its pixels' reservation waited from `from` (headerRead) to `to`: waiting, not decoding. */
  reserved(from: number, to: number): void {
    this.#reservedMs += to - from;
    this.#marks?.mark('decode_reserved', to);
  }

  /** Its pixels are here (or, a file for the sidecar: its header was read). */
  decoded(at = performance.now()): number {
    this.#decodedAt = at;
    this.#marks?.mark('decode_done', at);
    return at;
  }

  /** Its first decode: its time without the reservation's wait. */
  get decodeMs(): number {
    return (this.#decodedAt ?? this.#decodeFrom) - this.#decodeFrom - this.#reservedMs;
  }

  /** A file the sidecar declined, decoded here from `startedAt` for `ms`: decode time, and the round trip before it waiting. */
  redecoded(ms: number, startedAt: number): void {
    this.#redecodeMs += ms;
    this.#elsewhereMs = startedAt - (this.#decodedAt ?? startedAt);
  }

  /** What the pipeline reports as decode (the sidecar's own decode is added there) and as waiting before the forward. */
  get run(): { t0: number; decodeMs: number; waitMs: number } {
    return { t0: this.t0, decodeMs: this.decodeMs + this.#redecodeMs, waitMs: this.#decodeFrom - this.#waitFrom + this.#reservedMs + this.#elsewhereMs };
  }

  /** Handed to the engine queue at `queued`; `out` is what came back. */
  forwarded(queued: number, out: ForwardReadings): void {
    const m = this.#marks;
    if (!m) return;
    m.mark('engine_queued', queued);
    m.mark('dispatched', queued + (out.queueMs ?? 0));
    // A backend without a socket (in-process, tests) reports neither: its whole call is the sidecar stage.
    m.mark('frame_written', out.frameWrittenAt ?? queued + (out.queueMs ?? 0));
    m.mark('reply_read', out.replyReadAt ?? performance.now());
    m.sidecar({ decodeMs: out.decodeMs, preprocessMs: out.preprocessMs, forwardMs: out.forwardMs });
  }

  /** The pipeline's timing_ms: the reply back in the detector and the detections out, on this clock. */
  done(t: PredictTiming): void {
    this.#marks?.mark('forward_done', this.t0 + t.total - t.postprocess);
    this.#marks?.mark('postprocessed', this.t0 + t.total);
  }
}
