// The one loop every frame goes through, whoever asked (POST /predict: a body's images; POST /predict/video:
// ffmpeg's frames; `rfdetr detect`: files, videos, live streams) and whatever the frame holds (frame.ts: a file,
// pixels, a tensor): pull a frame from the source, send it to the detector (the backend's transport, the
// forward, the postprocess), hand the result to the sink, in order. Tracking is a sink decorator
// (src/track/tag-frames.ts trackingSink).
//
// Overlap: at most `inFlight` frames (default 2) are in the detector at once, so the sidecar prepares frame
// N+1 while N is on the engine; pulling frame N+1 from the source and its decode (in the detector's
// transport) happen while N is on the engine; the sink (drawing, encoding, writing) of N−1 runs while N and N+1 are in the detector. The sink
// runs one frame at a time, and nothing more is pulled while it lags, so memory is bounded by
// inFlight + 2 frames whatever the source's length.
//
// Errors: a frame the detector refuses as bad input (`isFrameProblem`) reaches the sink as `error` and the run
// goes on; any other failure stops the pulling, waits for what is in flight, and is thrown.

export interface FrameOutcome<F, R> {
  frame: F;
  result?: R;
  /** Set instead of `result` when the frame was refused (a per-frame problem). */
  error?: Error;
}

export interface RunFramesOptions {
  /** Frames in the detector at once (≥ 1). Default 2. */
  inFlight?: number;
  /** Whether an error from `detect` concerns only that frame (the run goes on). Default: none do. */
  isFrameProblem?: (e: unknown) => boolean;
  /** Stop pulling new frames once aborted; what is in flight is finished and sunk. */
  signal?: AbortSignal;
}

export interface RunFramesStats {
  /** Frames pulled from the source. */
  frames: number;
  /** Frames the detector refused. */
  failed: number;
  /** Time with at least one frame in the detector (ms): detector busy time as the pipeline saw it. */
  busyMs: number;
  /** Wall time of the whole run (ms). */
  wallMs: number;
}

/**
 * Runs every frame of `source` through `detect` and `sink`, in source order. A source frame may carry its own
 * refusal (`error` set by the source, e.g. an undecodable still): it skips the detector and goes to the sink.
 */
export async function runFrames<F, R>(
  source: AsyncIterable<F | { frame: F; error: Error }>,
  detect: (frame: F) => Promise<R>,
  sink: (o: FrameOutcome<F, R>) => Promise<void> | void,
  opts: RunFramesOptions = {},
): Promise<RunFramesStats> {
  const inFlight = Math.max(1, opts.inFlight ?? 2);
  const isProblem = opts.isFrameProblem ?? (() => false);
  const t0 = performance.now();
  const stats: RunFramesStats = { frames: 0, failed: 0, busyMs: 0, wallMs: 0 };
  let busy = 0;
  let busySince = 0;
  const enter = () => {
    if (busy++ === 0) busySince = performance.now();
  };
  const leave = () => {
    if (--busy === 0) stats.busyMs += performance.now() - busySince;
  };

  type Pending = Promise<FrameOutcome<F, R> | { fatal: unknown }>;
  const pending: Pending[] = [];
  const it = source[Symbol.asyncIterator]();
  let sourceDone = false;
  let fatal: { e: unknown } | null = null;
  let sinking: Promise<void> = Promise.resolve();

  const start = (item: F | { frame: F; error: Error }): Pending => {
    if (isRefusal<F>(item)) return Promise.resolve({ frame: item.frame, error: item.error });
    enter();
    return detect(item).then(
      (result) => ({ frame: item, result }),
      (e: unknown) => (isProblem(e) ? { frame: item, error: e as Error } : { fatal: e }),
    ).finally(leave);
  };

  try {
    for (;;) {
      while (!sourceDone && !fatal && pending.length < inFlight && !opts.signal?.aborted) {
        const r = await it.next();
        if (r.done) {
          sourceDone = true;
          break;
        }
        stats.frames++;
        pending.push(start(r.value));
      }
      const head = pending.shift();
      if (!head) break;
      const o = await head;
      if ('fatal' in o) {
        fatal ??= { e: o.fatal };
        continue;
      }
      if (fatal) continue;
      if (o.error) stats.failed++;
      await sinking;
      sinking = Promise.resolve(sink(o));
      // A failing sink is fatal: seen on the next turn, or below.
      sinking.catch((e: unknown) => (fatal ??= { e }));
    }
    await sinking.catch(() => {});
  } finally {
    await Promise.allSettled(pending);
    if (!sourceDone) await it.return?.();
  }
  stats.wallMs = performance.now() - t0;
  if (fatal) throw fatal.e;
  return stats;
}

function isRefusal<F>(item: F | { frame: F; error: Error }): item is { frame: F; error: Error } {
  return typeof item === 'object' && item !== null && 'error' in item && (item as { error: unknown }).error instanceof Error && 'frame' in item;
}
