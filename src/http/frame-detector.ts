// The server's detector for one frame (an image of POST /predict, a frame of POST /predict/video): the budgets
// around the backend's transport (src/sidecar/transport.ts), then the engine queue, the detect pipeline and
// return_image's drawing. A file takes a decode slot, then its pixels and any annotation's bytes are reserved
// from its header (fairly across clients) before a pixel is decoded; decoded pixels (a video frame) are
// reserved as they are. Its decode time is charged to the client's share of the engine, and its errors come
// out as the request's answer would be (E_IMAGE_UNDECODABLE, or inferenceError's mapping). One stage clock
// (src/detect/stage-clock.ts) gives its timing_ms and, when the request has a timeline, its Server-Timing marks.
import { annotate, type ImageFormat } from '../draw/annotate.ts';
import { detectDecoded, inputSizeOf, isEncoded, wantsMasks, type DetectParams, type DetectResult } from '../detect/pipeline.ts';
import { imageOfInput, type Frame } from '../detect/frame.ts';
import type { EncodedImage, RgbImage } from '../image/decode.ts';
import type { InferInput } from '../sidecar/backend.ts';
import type { Prepared } from '../sidecar/transport.ts';
import { annotateCost, selectedRowsCost } from './memory-budget.ts';
import { inferenceError } from './respond.ts';
import type { FrameDeps, RunContext } from './predict-context.ts';
import type { Timeline } from './timeline.ts';
import { StageClock } from '../detect/stage-clock.ts';

/**
 * What an image's decode is charged against its client's share of the engine (engine-queue.ts charge()): its
 * time, at most what its pixels cost a free core. With --decode-nice the decode threads wait for the cores the
 * engine is using, and that wait is no work taken from the engine: a 640×480 PNG's decode took 6–8 ms of CPU
 * and 45 ms → 281 ms of wall time under the red-team attack, 8192² ones 190–340 ms of CPU (this host), hence
 * 5 ms + 4 ns per pixel.
 */
export function decodeCharge(decodeMs: number, header: { width: number; height: number } | undefined): number {
  return header ? Math.min(decodeMs, 5 + 4e-6 * header.width * header.height) : decodeMs;
}

/** One frame of a request, with what the server runs it under. */
export interface ServerFrame extends Frame {
  params: DetectParams & { fast_decode?: boolean };
  /** return_image's format: the pixels are then decoded here and drawn on. */
  returnImage?: ImageFormat | undefined;
  /** The request's context (a video frame: its own, with its own deadline). */
  run: RunContext;
  /** The timeline its stages are marked on: a lone image's (a batch's images overlap each other: none). */
  timeline?: Timeline | undefined;
  /** Called once its file's bytes are no longer needed (the body they are in may be released). */
  fileDone: () => void;
  /** Gives up its place in the request's queue places (called when its forward starts, or when it ends). */
  leaveQueue: () => void;
}

/** What the detector needs: one model's backend, queue and labels, and the server's budgets. */
export type FrameDetectorDeps = FrameDeps;

function once(f: () => void): () => void {
  let called = false;
  return () => {
    if (!called) (called = true), f();
  };
}

/** The detector over `d`: one per handler, called for each frame of each request. */
export function createFrameDetector(d: FrameDetectorDeps) {
  const { admission, engine } = d;

  return async function detectFrame(f: ServerFrame): Promise<DetectResult<RgbImage | EncodedImage>> {
    const { run: r, returnImage, params } = f;
    const { signal, client } = r;
    const isFile = 'file' in f.data;
    // The pixels' memory reservation (and, with return_image, the drawing's).
    const releases: Array<() => void> = [];
    const fileDone = once(f.fileDone);
    let prepared: Prepared | undefined;
    try {
      // A file: a decode slot, then the pixels' bytes (reserved from the header, before any pixel is decoded).
      const clock = new StageClock(r.t0, f.timeline);
      clock.waiting();
      const slot = async () => {
        const release = await admission.decodes.acquire(signal, () => signal.reason as Error, 1, client);
        clock.decodeStarted();
        return release;
      };
      let header: { width: number; height: number } | undefined;
      const reserve = async (n: number, size: { width: number; height: number }) => {
        header = size;
        // A segment model's mask rows arrive with the forward's reply and stay until the response is written.
        let need = n + selectedRowsCost(d.backend.info?.outputs, wantsMasks(params));
        if (isFile) {
          // The drawing and its encodings are reserved with the pixels: an image too large to annotate within
          // the budget is refused here, before a pixel is decoded. The earlier images of the same request whose
          // output waits in the response count too (else the request would wait for room only its own
          // response can free).
          need += returnImage ? annotateCost(size.width, size.height) : 0;
          if (need + r.outputBytes > admission.memory.maxWorkPerImage) throw admission.memory.tooLargeFor(size.width, size.height, need, returnImage !== undefined, r.outputBytes);
        }
        const r0 = clock.headerRead();
        releases.push(await admission.memory.work.acquire(signal, () => signal.reason as Error, need, client));
        clock.reserved(r0, performance.now());
      };
      // The memory stays reserved until the response is written.
      prepared = await d.backend.prepare(f.data, {
        signal, slot, reserve, decode: d.decode, fileDone,
        needPixels: returnImage !== undefined,
        fastDecode: params.fast_decode ? { size: inputSizeOf(d.backend.info)[0] } : undefined,
      });
      if (prepared.by === 'server') d.metrics.imagesDecoded.inc({ by: 'server' });
      clock.decoded();
      // A file for the sidecar: its header read here; the sidecar's decode is added by the pipeline.
      if (isFile) engine.charge(client, decodeCharge(clock.decodeMs, header));
      if (signal.aborted) throw signal.reason;
      const forward = (input: InferInput) => detectDecoded(
        async (inp, o) => {
          r.inEngine();
          const queued = performance.now();
          const out = await engine.run(inp, { signal: o.signal ?? signal, deadlineAt: r.deadlineAt, deadlineMs: d.deadlineMs, client, onStart: f.leaveQueue, ...(o.select ? { select: o.select } : {}) });
          clock.forwarded(queued, out);
          return out;
        },
        d.backend.info, imageOfInput(input), params,
        { ...clock.run, signal, labels: d.labels() },
      );
      try {
        const result = await prepared.send(forward, (fallbackMs, t1) => {
          engine.charge(client, decodeCharge(fallbackMs, header));
          d.metrics.imagesDecoded.inc({ by: 'server_after_decline' });
          clock.redecoded(fallbackMs, t1);
        });
        if (prepared.by === 'sidecar') d.metrics.imagesDecoded.inc({ by: 'sidecar' });
        clock.done(result.response.timing_ms);
        if (returnImage && !isEncoded(result.image)) {
          const png = await annotate(result.image, result.response.detections, returnImage);
          // Until written, the response holds the base64, the JSON string and the buffer sent (4/3 each).
          const output = 4 * Math.ceil(png.length / 3) * 3;
          r.outputBytes += output;
          r.holdUntilSent(admission.memory.work.force(output, client));
          result.response.annotated_image = { format: returnImage, media_type: `image/${returnImage}`, base64: png.toString('base64') };
        }
        d.onForward(result.response.timing_ms.inference);
        r.stageTimes.push(result.response.timing_ms);
        return result;
      } catch (e) {
        throw inferenceError(e);
      }
    } finally {
      prepared?.release();
      fileDone();
      f.leaveQueue();
      for (const release of releases) release();
    }
  };
}
