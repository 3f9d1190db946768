// `rfdetr detect INPUT...`: wiring only. Inputs are still images (sharp) or videos and live sources (ffmpeg),
// told apart by content (cli/media-kind.ts); both go through the one frame pipeline (src/detect/frame-runner.ts)
// to the engine in this process or, with --url, a running server (cli/commands/detect-engine.ts).
//
// Output: --json → stdout carries exactly one compact JSON line per image that succeeded (the /predict
// response plus "image") and per processed video frame (plus "source", "frame", "pts_ms"), nothing else;
// otherwise a table per image and a progress line per video on stderr. A closing line on stderr either way,
// which says how many stills the sidecar decoded and how many were decoded here.
//
// Failures: an input that names nothing is reported before any engine starts and skipped; when no input names
// anything nothing is started at all. An image or video that cannot be read or decoded is reported on stderr
// naming it and the run continues with the others; the exit status is then 1. An engine or server failure
// stops the run (exit 1). SIGINT/SIGTERM stop pulling frames: what is in flight is finished, saved videos are
// closed (valid files), the summary is printed, and the exit status is 0.
import fs from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import { isRfdetrError, RfdetrError } from '../../src/errors.ts';
import { trackerOptions, type TrackerFlags } from '../track-options.ts';
import type { CliContext } from '../context.ts';
import { expandInputs, peekStream, readStreamCapped, type ImageInput } from '../inputs.ts';
import { fileKind, isStreamableVideo, sniffMedia } from '../media-kind.ts';
import { stderrLine } from '../context.ts';
import { ImagesFailedError } from '../failures.ts';
import { inProcessDetector, remoteDetector, type DetectParamsFlags, type FrameDetector } from './detect-engine.ts';
import { runImages, type ImageRunTotals } from './detect-images.ts';
import { runVideo, type StdinMedia, type VideoFlags, type VideoRunResult } from './detect-video.ts';

export { formatTable } from './detect-images.ts';

export interface DetectFlags extends DetectParamsFlags, Partial<TrackerFlags>, Omit<VideoFlags, 'tracker'> {
  save?: string;
  recursive?: boolean;
  url?: string;
  track?: boolean;
}

type Input = ImageInput & { kind: 'image' | 'video' } & StdinMedia;

const VIDEO_PROBLEMS = ['E_VIDEO_UNDECODABLE', 'E_VIDEO_TOO_LARGE', 'E_VIDEO_TIMEOUT'] as const;

async function readStdinInput(ctx: CliContext): Promise<{ kind: 'image' | 'video' } & StdinMedia> {
  if (!ctx.stdin) {
    const bytes = await ctx.readStdin();
    return { kind: sniffMedia(bytes.subarray(0, 512)), stdinBytes: bytes };
  }
  const { head, whole } = await peekStream(ctx.stdin, 512);
  if (sniffMedia(head) === 'image') return { kind: 'image', stdinBytes: await readStreamCapped(whole) };
  return { kind: 'video', stdinStream: whole, stdinPipe: isStreamableVideo(head) };
}

export async function runDetect(ctx: CliContext, inputs: string[], f: DetectFlags, cmd: Command): Promise<void> {
  const log = stderrLine(ctx);
  if (f.url !== undefined) {
    const local = ['engine', 'threads', 'precision', 'weights', 'model', 'revision'].filter((k) => cmd.getOptionValueSource(k) === 'cli');
    if (local.length) {
      const flags = local.map((k) => `--${k}`).join(', ');
      throw new RfdetrError('E_USAGE', `detect: --url sends the images to a running server, which has its own engine and weights; ${flags} cannot be combined with it (drop ${local.length === 1 ? 'it' : 'them'}, or drop --url to run the engine here)`);
    }
  }
  const { images: found, problems } = expandInputs(inputs, { cwd: ctx.cwd, recursive: f.recursive ?? false });
  for (const p of problems) log(`detect: skipped ${p}`);
  if (found.length === 0) {
    throw new ImagesFailedError(`detect: no input names an image or video (${problems.length} skipped); nothing was run. Expected image or video files, directories of them, globs, stream addresses or - for stdin`);
  }
  const items: Input[] = [];
  for (const i of found) {
    if (i.live !== undefined) items.push({ ...i, kind: 'video' });
    else if (i.path !== null) items.push({ ...i, kind: fileKind(i.path) });
    else if (i.url !== undefined) items.push({ ...i, kind: 'image' });
    else {
      // stdin, told apart by its first bytes before any engine starts: an image is read whole (capped); a video
      // is decoded as it arrives when its container allows (an endless pipe streams), else spooled.
      let got: Pick<Input, 'kind' | 'stdinBytes' | 'stdinStream' | 'stdinPipe'>;
      try {
        got = await readStdinInput(ctx);
      } catch (e) {
        if (found.length === 1) throw new ImagesFailedError(`detect: -: ${(e as Error).message}; nothing was run`);
        log(`detect: skipped -: ${(e as Error).message}`);
        problems.push(`-: ${(e as Error).message}`);
        continue;
      }
      items.push({ ...i, ...got });
    }
  }
  if (items.length === 0) throw new ImagesFailedError(`detect: no input could be read (${problems.length} skipped); nothing was run`);
  const videos = items.filter((i) => i.kind === 'video');
  if (f.url !== undefined && videos.length) {
    throw new RfdetrError('E_USAGE', `detect: --url sends still images to POST /predict; ${videos[0]!.name} is a video (send videos to the server's POST /predict/video, or drop --url to run the engine here)`);
  }
  let saveDir: string | undefined;
  if (f.save !== undefined) {
    saveDir = path.resolve(ctx.cwd, f.save);
    try {
      fs.mkdirSync(saveDir, { recursive: true });
    } catch (e) {
      throw new Error(`detect: --save ${f.save}: cannot create the directory (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
    }
  }

  const detector: FrameDetector = f.url !== undefined ? await remoteDetector(ctx, f, f.url) : await inProcessDetector(ctx, f);
  // Ctrl-C / SIGTERM: stop pulling frames, finish what is in flight, close the outputs, exit 0.
  const stop = new AbortController();
  let stoppedBy: string | null = null;
  const onSignal = (sig: NodeJS.Signals) => {
    stoppedBy ??= sig;
    stop.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  const used = new Set<string>();
  const totals: ImageRunTotals = { ok: 0, failed: [], notSaved: [], sums: { decode: 0, preprocess: 0, inference: 0, postprocess: 0, transfer: 0, total: 0 }, bySidecar: 0, byHere: 0 };
  const videoRuns: VideoRunResult[] = [];
  let stills = 0;
  const t0 = performance.now();
  try {
    for (let k = 0; k < items.length && !stop.signal.aborted;) {
      const item = items[k]!;
      if (item.kind === 'image') {
        let j = k;
        while (j < items.length && items[j]!.kind === 'image') j++;
        const run = items.slice(k, j);
        stills += run.length;
        await runImages(ctx, run, detector, { json: f.json ?? false, saveDir, used, totals, signal: stop.signal });
        k = j;
        continue;
      }
      k++;
      try {
        const r = await runVideo(ctx, item, detector, {
          json: f.json, vidStride: f.vidStride, maxFrames: f.maxFrames, start: f.start, duration: f.duration, openTimeout: f.openTimeout, drop: f.drop,
          tracker: f.track ? trackerOptions(f as TrackerFlags) : undefined,
          trackerRateFromVideo: cmd.getOptionValueSource('frameRate') !== 'cli',
        }, { saveDir, used, signal: stop.signal });
        videoRuns.push(r);
        const s = r.wallMs / 1000;
        log(`detect: ${item.shown}: ${r.frames} frames in ${s.toFixed(2)} s (${(r.frames / Math.max(s, 1e-9)).toFixed(1)} frames/s, engine busy ${((100 * r.busyMs) / Math.max(r.wallMs, 1e-9)).toFixed(0)} %)${item.live !== undefined ? `, ${r.dropped} dropped, ${r.reconnects} reconnects` : ''}${r.saved ? `; saved ${r.saved}` : ''}`);
      } catch (e) {
        if (!VIDEO_PROBLEMS.some((c) => isRfdetrError(e, c)) && !(e instanceof Error && e.name === 'RefusedOverwrite')) throw e;
        log(`detect: ${item.shown}: ${(e as Error).message}`);
        totals.failed.push(item.name);
      }
    }
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await detector.close().catch((e: Error) => log(`detect: closing the ${f.url ? 'client' : 'engine'} failed: ${e.message}`));
  }
  const s = (performance.now() - t0) / 1000;
  const ok = totals.ok;
  const per = (k: keyof ImageRunTotals['sums']) => (ok ? (totals.sums[k] / ok).toFixed(1) : '-');
  const total = items.length + problems.length;
  const bad = totals.failed.length + problems.length;
  const frames = videoRuns.reduce((a, r) => a + r.frames, 0);
  const detected = ok + videoRuns.length;
  const counts = bad || totals.notSaved.length
    ? `${detected} of ${total} input${total === 1 ? '' : 's'} detected${bad ? `, ${bad} failed${problems.length ? ` (${problems.length} named no image)` : ''}` : ''}${totals.notSaved.length ? `, ${totals.notSaved.length} not saved` : ''}`
    : [...(stills || !videos.length ? [`${ok} image${ok === 1 ? '' : 's'}`] : []), ...(videos.length ? [`${videoRuns.length} video${videoRuns.length === 1 ? '' : 's'}`] : [])].join(' and ');
  // Where the stills were decoded (the transport's choice: src/sidecar/transport.ts); a server's (--url) are not told.
  const decodedBy = totals.bySidecar + totals.byHere ? `; decoded: ${totals.bySidecar} by the sidecar, ${totals.byHere} here` : '';
  const videoPart = videos.length ? `; ${frames} video frame${frames === 1 ? '' : 's'}` : '';
  log(`detect: ${counts} in ${s.toFixed(2)} s${stills ? ` (${(ok / Math.max(s, 1e-9)).toFixed(2)} images/s); mean ms per image: decode ${per('decode')}, preprocess ${per('preprocess')}, inference ${per('inference')}, postprocess ${per('postprocess')}, transfer ${per('transfer')}, total ${per('total')}${decodedBy}` : ''}${videoPart}${saveDir ? `; annotated copies in ${saveDir}` : ''}${stoppedBy ? `; stopped by ${stoppedBy}` : ''}`);
  if (bad || totals.notSaved.length) {
    const why = [
      ...(totals.failed.length ? [`failed: ${totals.failed.join(', ')}`] : []),
      ...(problems.length ? [`named no image: ${problems.length}`] : []),
      ...(totals.notSaved.length ? [`not saved: ${totals.notSaved.join(', ')}`] : []),
    ];
    throw new ImagesFailedError(`detect: ${bad} of ${total} input${total === 1 ? '' : 's'} failed${totals.notSaved.length ? ` and ${totals.notSaved.length} not saved` : ''} (${why.join('; ')})`);
  }
}
