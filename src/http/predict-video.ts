// POST /predict/video: serving? → an upload place → the body onto disk (video-body.ts; bytes capped → 413; the
// disk budget, the minimum rate and the upload timeout: video-uploads.ts) → a video slot, once the upload is complete →
// ffprobe (duration, frame count and size capped → 422) → ffmpeg decoding RGB frames (src/video): the frame
// source of the one runner (src/detect/frame-runner.ts), each frame through the same detector as the stills
// (frame-detector.ts: its pixels reserved from the budget, the same engine queue, so stills are answered
// between video frames, the same timing_ms stages) → an NDJSON sink: one line per frame as soon as it is done,
// in order (ByteTrack ids with ?track=1, the tracking decorator), then a summary line. At most two frames of
// one video are in the engine queue at once, so a still waits behind two frames at most. The client leaving (or the drain) aborts the run: ffmpeg is stopped, the
// temporary file removed. An error once lines are out is written as a last line {"error": {...}}.
import os from 'node:os';
import type { Request, Response } from 'express';
import { RfdetrError, isRfdetrError } from '../errors.ts';
import type { PredictDetection, PredictResponse, PredictTiming } from '../detect/pipeline.ts';
import { runFrames, type FrameOutcome } from '../detect/frame-runner.ts';
import { FrameTagger, trackingSink } from '../track/tag-frames.ts';
import type { OpenVideoOptions, VideoSource } from '../video/source.ts';
import type { ModelLane, ModelLanes } from './model-lanes.ts';
import type { PredictDeps } from './predict-context.ts';
import { requestedModel } from './served-models.ts';
import { abortedBy, beginActive, type ActivePredict } from './active.ts';
import { classFilterOf } from './params.ts';
import { inferenceError, type ErrorResponder } from './respond.ts';
import { createFrameDetector, type FrameDetectorDeps, type ServerFrame } from './frame-detector.ts';
import { receiveVideo, videoBodyFormOf } from './video-body.ts';
import { parseVideoParams } from './video-schema.ts';
import type { VideoLimits } from './video-limits.ts';
import type { Upload, VideoUploads } from './video-uploads.ts';
import type { Logger } from './log.ts';
import { clientSafeError } from './server-paths.ts';

/** Frames of one video handed to the engine queue at once. */
const FRAMES_IN_QUEUE = 2;

/** Opens an uploaded file for decoding (src/video's openVideo; tests script it). */
export type OpenVideo = (file: string, opts: OpenVideoOptions) => Promise<VideoSource>;

export interface VideoDeps extends Omit<FrameDetectorDeps, 'backend' | 'engine' | 'labels' | 'onForward'> {
  /** The models served; a video picks one (its `model` field, else the query string's, else the first). */
  lanes: ModelLanes;
  laneDeps: (lane: ModelLane) => FrameDetectorDeps;
  notServing: PredictDeps['notServing'];
  errors: ErrorResponder;
  limits: VideoLimits;
  openVideo: OpenVideo;
  /** Where uploads are written (default os.tmpdir()). */
  tmpRoot?: string | undefined;
  /** Who sent the request, for the fair share (the API key, else the address). */
  clientOf: (req: Request, res: Response) => string;
  /** Uploads arriving: their places, disk bytes and times (video-uploads.ts). */
  uploads: VideoUploads;
  /** Where an error that named a server path is logged as it was (the client gets it without). */
  logger?: Logger | undefined;
}

interface FrameLine {
  frame: number;
  pts_ms: number;
  image_size: { width: number; height: number };
  detections: (PredictDetection & { track_id?: number | null })[];
  num_detections: number;
  /** The stages of a /predict image's timing_ms, in its order. */
  timing_ms: PredictTiming;
}

function videoTooLong(has: string, limit: string, details: Record<string, unknown>): RfdetrError {
  return new RfdetrError('E_VIDEO_TOO_LONG', `the video ${has}; the limit is ${limit}: send a shorter video or cut it first`, details);
}

/** Resolves once `res` can take more (or has closed). */
function drained(res: Response): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
  });
}

export function createVideoHandler(d: VideoDeps, active: Set<ActivePredict>) {
  const { admission, limits } = d;
  const detectors = new WeakMap<ModelLane, ReturnType<typeof createFrameDetector>>();
  const detectorOf = (lane: ModelLane) => {
    let f = detectors.get(lane);
    if (!f) detectors.set(lane, (f = createFrameDetector(d.laneDeps(lane))));
    return f;
  };
  const tmpRoots = [d.tmpRoot ?? os.tmpdir()];
  let running = 0;

  async function run(req: Request, res: Response, signal: AbortSignal, cleanups: Array<() => Promise<void>>): Promise<void> {
    const form = videoBodyFormOf(req);
    const client = d.clientOf(req, res);
    const body = admission.enterBody(client);
    // The upload holds an upload place and its bytes on the disk budget, never a video slot; too slow or too
    // late, `late` ends it (video-uploads.ts).
    const late = new AbortController();
    let place: Upload;
    try {
      place = d.uploads.enter(client, (err) => late.abort(err));
    } catch (e) {
      body.leave();
      throw e;
    }
    cleanups.push(async () => place.release());
    let upload;
    try {
      upload = await receiveVideo(req, form, { maxBytes: limits.maxBytes, tmpRoot: d.tmpRoot, signal: AbortSignal.any([signal, late.signal]), onBytes: (n) => place.received(n) });
    } finally {
      place.arrived();
      body.leave();
    }
    cleanups.push(upload.cleanup);
    if (signal.aborted) throw signal.reason;
    // The upload is complete: now a slot, or 503 at once (never parked: the client holds a connection).
    if (running >= limits.maxVideos) {
      throw new RfdetrError('E_QUEUE_FULL', `${limits.maxVideos} videos are being processed (--video-max-concurrent): retry after the Retry-After delay`, { max_videos: limits.maxVideos });
    }
    running++;
    cleanups.push(async () => {
      running--;
    });
    const params = parseVideoParams(upload.fields);
    // The model is picked once: a reload that swaps it later leaves this video on the one it picked.
    const lane = d.lanes.resolve(requestedModel(req, params));
    const refuse = lane.engineState.notServing();
    if (refuse) throw refuse;
    const leaveLane = lane.enter();
    cleanups.push(async () => leaveLane());
    const { engine } = lane;
    const detectFrame = detectorOf(lane);
    const classes = classFilterOf(params.classes, lane.labels());

    const video = await d.openVideo(upload.file, { stride: params.stride, signal, name: 'the uploaded video' });
    cleanups.push(() => video.close());
    if (signal.aborted) throw signal.reason;
    const info = video.info;
    if (info?.durationMs !== undefined && info.durationMs / 1000 > limits.maxDurationS) {
      const s = info.durationMs / 1000;
      throw videoTooLong(`lasts ${s.toFixed(3)} s`, `${limits.maxDurationS} s (--video-max-duration-s)`, { duration_s: s, max_duration_s: limits.maxDurationS });
    }
    if (info?.frameCount !== undefined && info.frameCount > limits.maxFrames) {
      throw videoTooLong(`has ${info.frameCount} frames`, `${limits.maxFrames} frames (--video-max-frames)`, { frames: info.frameCount, max_frames: limits.maxFrames });
    }
    // A video has at most FRAMES_IN_QUEUE frames waiting for the engine at any time: it holds that many places in
    // the queue for its whole run, so --queue-size bounds videos and stills together.
    const places = admission.admit(client, FRAMES_IN_QUEUE);
    cleanups.push(async () => places.leaveAll());

    res.status(200);
    res.setHeader('Content-Type', 'application/x-ndjson; charset=utf-8');
    res.setHeader('Cache-Control', 'no-store');
    res.setHeader('X-Accel-Buffering', 'no'); // proxies: pass each line on as it comes
    res.flushHeaders();

    const t0 = performance.now();
    let processed = 0;
    let detections = 0;
    let forwardMs = 0;
    const stopped = abortedBy(signal);
    stopped.catch(() => {});
    const write = async (line: object) => {
      if (!res.write(`${JSON.stringify(line)}\n`)) await Promise.race([drained(res), stopped]);
    };
    const detectParams = { threshold: params.threshold, max_detections: params.max_detections, classes, mask_format: params.mask_format };
    const noop = () => {};
    // ffmpeg's decoding is work on the host's cores for this client, as a still's decode is: its CPU time is
    // charged to the client's share of the engine as it accrues (a still's decode: frame-detector.ts).
    async function* frames(): AsyncGenerator<ServerFrame | { frame: ServerFrame; error: Error }> {
      let decoderCharged = 0;
      for await (const v of video) {
        if (signal.aborted) return;
        const decoderMs = video.decoderCpuMs?.() ?? null;
        if (decoderMs !== null && decoderMs > decoderCharged) {
          engine.charge(client, decoderMs - decoderCharged);
          decoderCharged = decoderMs;
        }
        // Each frame runs under its own deadline, from when it is pulled.
        const t = performance.now();
        const frame: ServerFrame = {
          data: { pixels: { data: v.rgb, width: v.width, height: v.height } }, index: v.index, ptsMs: v.ptsMs, params: detectParams,
          run: { signal, t0: t, deadlineAt: t + d.deadlineMs, inEngine: noop, client, outputBytes: 0, holdUntilSent: noop, stageTimes: [] },
          fileDone: noop, leaveQueue: noop,
        };
        // the container's frame count can be missing or wrong: the decoded frames are what counts. Its error
        // reaches the sink after the frames before it were written, and ends the run there.
        if (v.index >= limits.maxFrames) {
          yield { frame, error: videoTooLong(`has more than ${limits.maxFrames} frames`, `${limits.maxFrames} frames (--video-max-frames)`, { max_frames: limits.maxFrames }) };
          return;
        }
        yield frame;
      }
    }
    type Outcome = FrameOutcome<ServerFrame, { response: PredictResponse }>;
    const lineOf = (o: Outcome): FrameLine | undefined => {
      if (!o.result) return undefined;
      const r = o.result.response;
      return { frame: o.frame.index, pts_ms: o.frame.ptsMs ?? 0, image_size: r.image_size, detections: r.detections, num_detections: r.num_detections, timing_ms: r.timing_ms };
    };
    const ndjson = async (o: Outcome) => {
      if (o.error) throw o.error;
      const line = lineOf(o)!;
      processed++;
      detections += line.num_detections;
      forwardMs += line.timing_ms.inference;
      await write(line);
    };
    const sink = params.track
      ? trackingSink(ndjson, (o) => o.result?.response, () => new FrameTagger({ frameRate: video.fps > 0 ? video.fps : 30 }))
      : ndjson;
    // A video has at most FRAMES_IN_QUEUE frames waiting for the engine at any time.
    try {
      await runFrames(frames(), detectFrame, sink, { inFlight: FRAMES_IN_QUEUE, signal });
    } catch (e) {
      // A frame stopped by the abort fails with its own words; the run ends for the abort's reason (the drain, the client gone).
      throw signal.aborted ? signal.reason : e;
    }
    if (signal.aborted) throw signal.reason;
    const elapsedMs = performance.now() - t0;
    await write({
      summary: {
        frames: processed,
        stride: params.stride,
        detections,
        width: info?.width ?? 0,
        height: info?.height ?? 0,
        fps: video.fps,
        tracked: params.track,
        elapsed_ms: elapsedMs,
        frames_per_s: elapsedMs > 0 ? (processed * 1000) / elapsedMs : 0,
        inference_ms: forwardMs,
      },
    });
  }

  return async function handleVideo(req: Request, res: Response): Promise<void> {
    let refuse: RfdetrError | undefined;
    try {
      refuse = d.notServing(requestedModel(req, undefined));
    } catch (e) {
      return d.errors.send(res, e);
    }
    if (refuse) return d.errors.send(res, refuse);
    const { abort, end } = beginActive(active, res);
    const cleanups: Array<() => Promise<void>> = [];
    let failure: unknown;
    try {
      // Every step of run() stops on the signal (upload, probe, decode, engine queue, writes), so it is awaited
      // as is: racing it would let cleanup run before run() registered what it made.
      await run(req, res, abort.signal, cleanups);
    } catch (e) {
      abort.abort(e); // stops the decoder and the frames still queued
      // Never a server path to the client (the upload's temporary directory): the original goes to the log.
      failure = clientSafeError(e, tmpRoots);
      if (failure !== e) d.logger?.warn('a /predict/video error named a server path; the client got it without', { request_id: res.locals.requestId, error: e instanceof Error ? e.message : String(e) });
    }
    try {
      // The decoder ends and the upload is removed before the response ends, so a client that has read the
      // whole answer finds nothing left running.
      for (const c of cleanups.reverse()) await c().catch(() => {});
      if (failure === undefined) res.end();
      else if (res.destroyed) {
        // the client is gone (mid-upload or mid-answer): no one to answer
      } else if (!res.headersSent) d.errors.send(res, failure);
      else {
        const err = isRfdetrError(failure) ? failure : inferenceError(failure);
        res.end(`${JSON.stringify({ error: { detail: err.message, code: err.code, status: err.status, request_id: res.locals.requestId } })}\n`);
      }
    } finally {
      if (!req.complete) res.once('finish', () => req.socket.destroySoon());
      end();
    }
  };
}
