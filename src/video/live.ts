// A live source followed for as long as it is wanted: frames from one ffmpeg at a time (openVideo, unprobed),
// a new one with backoff whenever the stream drops or stalls, and a bounded queue between the decoder and
// the consumer. When the consumer falls behind, the oldest queued frame is dropped (counted), so memory
// stays flat however long the run; with `dropOldest: false` the decoder waits instead and every frame is kept.
//
// Frame indices keep counting across reconnects; ptsMs is the arrival time since the source was opened
// (a stream's own timestamps restart with every connection).
import { isRfdetrError } from '../errors.ts';
import { openVideo, type VideoFrame } from './source.ts';

export interface LiveOptions {
  /** Keep at most this many decoded frames waiting for the consumer (default 2). */
  queue?: number;
  /** Drop the oldest waiting frame when the queue is full (default true); false: the decoder waits. */
  dropOldest?: boolean;
  /** Longest wait for a frame before the connection counts as dropped (ms, default 10000). */
  timeoutMs?: number;
  /** First reconnect delay (ms, default 500), doubled per failed attempt up to maxDelayMs (default 10000). */
  baseDelayMs?: number;
  maxDelayMs?: number;
  /** Give up after this many reconnects in a row without a frame (default: never). */
  maxAttempts?: number;
  maxFrames?: number;
  stride?: number;
  signal?: AbortSignal;
  /** One line per event worth telling: a drop, a reconnect, a give-up. */
  log?: (line: string) => void;
  env?: NodeJS.ProcessEnv;
}

export interface LiveSource extends AsyncIterable<VideoFrame> {
  readonly dropped: number;
  readonly reconnects: number;
  /** Frames per second ffmpeg reports for the current connection (0 until known). */
  readonly fps: number;
}

export function openLive(input: string, o: LiveOptions = {}): LiveSource {
  const cap = Math.max(1, o.queue ?? 2);
  const drop = o.dropOldest ?? true;
  const queue: VideoFrame[] = [];
  const state = { dropped: 0, reconnects: 0, fps: 0 };
  let wakeConsumer: (() => void) | null = null;
  let wakeProducer: (() => void) | null = null;
  let finished = false;
  let failure: unknown = null;
  const t0 = performance.now();
  let index = 0;
  const stop = new AbortController();
  const onAbort = () => stop.abort();
  o.signal?.addEventListener('abort', onAbort, { once: true });
  const wait = (ms: number) => new Promise<void>((resolve) => {
    const t = setTimeout(resolve, ms);
    stop.signal.addEventListener('abort', () => (clearTimeout(t), resolve()), { once: true });
  });
  const notify = () => {
    const w = wakeConsumer;
    wakeConsumer = null;
    w?.();
  };

  async function produce(): Promise<void> {
    let attempts = 0;
    while (!stop.signal.aborted) {
      let got = 0;
      try {
        const src = await openVideo(input, { noProbe: true, timeoutMs: o.timeoutMs ?? 10_000, signal: stop.signal, stride: o.stride, env: o.env });
        try {
          for await (const f of src) {
            state.fps = src.fps;
            got++;
            attempts = 0;
            const frame = { ...f, index: index++, ptsMs: Math.round((performance.now() - t0) * 1000) / 1000 };
            if (queue.length >= cap) {
              if (drop) {
                queue.shift();
                state.dropped++;
              } else {
                while (queue.length >= cap && !stop.signal.aborted) await new Promise<void>((resolve) => (wakeProducer = resolve));
              }
            }
            queue.push(frame);
            notify();
            if (o.maxFrames !== undefined && index >= o.maxFrames) return;
          }
        } finally {
          await src.close();
        }
        if (stop.signal.aborted) return;
        o.log?.(`${input}: the stream ended after ${got} frames; reconnecting`);
      } catch (e) {
        if (stop.signal.aborted || isRfdetrError(e, 'E_ABORTED')) return;
        if (isRfdetrError(e, 'E_FFMPEG_MISSING')) throw e;
        o.log?.(`${input}: ${(e as Error).message}${got ? ` (after ${got} frames)` : ''}; reconnecting`);
      }
      attempts++;
      if (o.maxAttempts !== undefined && attempts > o.maxAttempts) {
        throw new Error(`${input}: gave up after ${o.maxAttempts} reconnects without a frame`);
      }
      const delay = Math.min(o.maxDelayMs ?? 10_000, (o.baseDelayMs ?? 500) * 2 ** (attempts - 1));
      await wait(delay);
      if (stop.signal.aborted) return;
      state.reconnects++;
      o.log?.(`${input}: reconnect ${state.reconnects} (after ${delay} ms)`);
    }
  }

  return {
    get dropped() {
      return state.dropped;
    },
    get reconnects() {
      return state.reconnects;
    },
    get fps() {
      return state.fps;
    },
    async *[Symbol.asyncIterator]() {
      const running = produce().catch((e: unknown) => (failure = e)).finally(() => {
        finished = true;
        notify();
      });
      try {
        for (;;) {
          const f = queue.shift();
          if (f) {
            const w = wakeProducer;
            wakeProducer = null;
            w?.();
            yield f;
            continue;
          }
          if (finished) break;
          await new Promise<void>((resolve) => (wakeConsumer = resolve));
        }
        if (failure) throw failure;
      } finally {
        stop.abort();
        const w = wakeProducer;
        wakeProducer = null;
        w?.();
        o.signal?.removeEventListener('abort', onAbort);
        await running;
      }
    },
  };
}
