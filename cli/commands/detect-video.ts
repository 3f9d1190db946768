// One video input (a file, stdin, or a live source) through the frame pipeline: frames from src/video, one
// NDJSON line per processed frame (--json) or a progress line on stderr, ByteTrack ids with --track (the
// tracking sink decorator), and with --save an annotated H.264 video (the source's fps, its audio copied, track
// ids in the labels).
import fs from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { annotateRaw } from '../../src/draw/annotate.ts';
import { runFrames, type FrameOutcome } from '../../src/detect/frame-runner.ts';
import type { ByteTrackOptions } from '../../src/track/bytetrack.ts';
import { FrameTagger, trackingSink } from '../../src/track/tag-frames.ts';
import { openLive, type LiveSource } from '../../src/video/live.ts';
import { openVideo, type VideoFrame, type VideoSource } from '../../src/video/source.ts';
import { openVideoWriter, outputFormatFor, type VideoWriter } from '../../src/video/writer.ts';
import type { CliContext } from '../context.ts';
import type { ImageInput } from '../inputs.ts';
import { RefusedOverwrite, refusalToReplace } from '../save-file.ts';
import type { Detected, DetectorFrame, FrameDetector } from './detect-engine.ts';
import { uniqueName } from './detect-images.ts';

/** What `-` holds: an image's bytes, or a video's stream (piped to ffmpeg as it arrives when `stdinPipe`). */
export interface StdinMedia {
  stdinBytes?: Buffer;
  stdinStream?: NodeJS.ReadableStream;
  stdinPipe?: boolean;
}

export interface VideoFlags {
  json?: boolean;
  vidStride?: number;
  maxFrames?: number;
  start?: number;
  duration?: number;
  openTimeout: number;
  drop: boolean;
  tracker?: ByteTrackOptions | undefined;
  /** The tracker's frame rate was not given: take it from the video (its fps over --vid-stride). */
  trackerRateFromVideo?: boolean;
}

export interface VideoRunResult {
  name: string;
  frames: number;
  dropped: number;
  reconnects: number;
  wallMs: number;
  busyMs: number;
  saved?: string;
}

interface Frame extends DetectorFrame {
  v: VideoFrame;
}

function eta(s: number): string {
  if (!Number.isFinite(s) || s < 0) return '?';
  const m = Math.floor(s / 60);
  return m ? `${m}m${String(Math.round(s % 60)).padStart(2, '0')}s` : `${Math.round(s)}s`;
}

export async function runVideo(ctx: CliContext, input: ImageInput & StdinMedia, detector: FrameDetector, f: VideoFlags, o: { saveDir?: string | undefined; used: Set<string>; signal: AbortSignal }): Promise<VideoRunResult> {
  const log = (l: string) => void ctx.stderr.write(`${l}\n`);
  const live = input.live !== undefined;
  let src: VideoSource | LiveSource;
  let file: string | null = null;
  if (live) {
    src = openLive(input.live!, { dropOldest: f.drop, timeoutMs: f.openTimeout, stride: f.vidStride, signal: o.signal, log: (l) => log(`detect: ${l}`), env: ctx.env });
  } else {
    file = input.path;
    src = await openVideo(file ?? input.stdinStream ?? Readable.from([input.stdinBytes ?? Buffer.alloc(0)]), {
      pipe: file === null && input.stdinPipe === true,
      stride: f.vidStride, maxFrames: f.maxFrames, startMs: f.start, durationMs: f.duration, timeoutMs: f.openTimeout, signal: o.signal, env: ctx.env,
    });
  }
  const info = 'info' in src ? src.info : null;
  const stride = Math.max(1, f.vidStride ?? 1);
  const expected = info?.frameCount !== undefined ? Math.ceil(Math.min(info.frameCount, f.duration !== undefined && info.fps ? (f.duration / 1000) * info.fps : Infinity) / stride) : undefined;
  const total = expected !== undefined && f.maxFrames !== undefined ? Math.min(expected, f.maxFrames) : expected;
  let writer: VideoWriter | null = null;
  let savedPath: string | undefined;
  const tty = ctx.stderr.isTTY === true;
  let done = 0;
  let lastDraw = 0;
  const t0 = performance.now();

  async function* frames(): AsyncGenerator<Frame> {
    const it = src[Symbol.asyncIterator]();
    let n = 0;
    try {
      // --max-frames counts processed frames (a live source's dropped ones are not).
      for (; f.maxFrames === undefined || n < f.maxFrames; n++) {
        const t = performance.now();
        const r = await it.next();
        if (r.done) return;
        const v = r.value;
        yield { v, data: { pixels: { data: v.rgb, width: v.width, height: v.height } }, index: v.index, ptsMs: v.ptsMs, source: input.name, t0: t };
      }
    } finally {
      await it.return?.();
    }
  }

  const progress = (final: boolean) => {
    if (!tty || f.json) return;
    const now = performance.now();
    if (!final && now - lastDraw < 250) return;
    lastDraw = now;
    const s = (now - t0) / 1000;
    const rate = done / Math.max(s, 1e-9);
    const tail = live ? `, ${(src as LiveSource).dropped} dropped` : total !== undefined ? `/${total}, ETA ${eta((total - done) / rate)}` : '';
    ctx.stderr.write(`\r\x1b[2K${input.shown}: ${done}${live ? '' : ''} frames${tail}, ${rate.toFixed(1)} frames/s`);
  };

  const draw = async ({ frame, result: detected }: FrameOutcome<Frame, Detected>) => {
    if (!detected) return;
    const v = frame.v;
    const result = detected.response;
    const { detections } = result;
    if (f.json) {
      ctx.stdout.write(`${JSON.stringify({ source: input.name, frame: v.index, pts_ms: v.ptsMs, ...result, detections })}\n`);
    }
    if (o.saveDir) {
      if (!writer) {
        const fmt = outputFormatFor(input.live ?? input.name);
        const name = uniqueName(input, () => fmt.ext, o.used);
        const target = path.join(o.saveDir, name);
        const why = refusalToReplace(target);
        if (why) throw new RefusedOverwrite(`${target} is ${why}; refusing to replace it (remove it or choose another directory)`);
        fs.rmSync(target, { force: true });
        const fps = (info?.fps || src.fps || 30) / stride;
        writer = openVideoWriter({
          path: target, width: v.width, height: v.height, fps, container: fmt.container, env: ctx.env,
          ...(info?.hasAudio && file && stride === 1 ? { audioFrom: { input: file, startMs: f.start, durationMs: f.maxFrames !== undefined && info.fps ? Math.min(f.duration ?? Infinity, (f.maxFrames * stride * 1000) / info.fps) : f.duration } } : {}),
        });
        savedPath = target;
      }
      const labelled = detections.map((d: (typeof detections)[number] & { track_id?: number | null }) => (d.track_id != null ? { ...d, label: `#${d.track_id} ${d.label}` } : d));
      await writer.write(await annotateRaw({ data: v.rgb, width: v.width, height: v.height }, labelled));
    }
    done++;
    progress(false);
  };

  let stats;
  try {
    // Made at the first frame: a live source knows its fps only once it has opened.
    const sink = f.tracker
      ? trackingSink(draw, (o) => o.result?.response, () => new FrameTagger(trackerAt(f.tracker!, f.trackerRateFromVideo ? (info?.fps || src.fps || 0) / stride : 0)))
      : draw;
    stats = await runFrames(frames(), (fr) => detector.detect(fr, false), sink, { signal: o.signal });
  } finally {
    if (tty && !f.json) ctx.stderr.write('\r\x1b[2K');
    if (writer) await (writer as VideoWriter).finish();
  }
  return {
    name: input.name, frames: done, dropped: live ? (src as LiveSource).dropped : 0, reconnects: live ? (src as LiveSource).reconnects : 0,
    wallMs: stats.wallMs, busyMs: stats.busyMs, ...(savedPath ? { saved: savedPath } : {}),
  };
}

/** The tracker's options at the frames' rate when it is known (> 0): --lost-track-buffer counts 30 fps frames. */
export function trackerAt(o: ByteTrackOptions, framesPerSecond: number): ByteTrackOptions {
  return framesPerSecond > 0 && Number.isFinite(framesPerSecond) ? { ...o, frameRate: framesPerSecond } : o;
}
