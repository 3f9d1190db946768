// `rfdetr detect INPUT...`. The definition only; the work (sharp, ffmpeg, the engine, the HTTP client) loads
// when the command runs, so --help stays fast.
import { Command, InvalidArgumentError, Option } from 'commander';
import type { CliContext } from '../context.ts';
import { addEngineOptions } from '../engine-flags.ts';
import { MASK_FORMATS } from '../../src/detect/masks/formats.ts';
import { EXIT_HELP } from '../failures.ts';
import { intParser, parseClasses, parseClassThresholds, parseThreshold } from '../parsers.ts';
import { addTrackerOptions } from '../track-options.ts';
import type { DetectFlags } from './detect-run.ts';

/** A time as seconds (12.5), mm:ss or hh:mm:ss(.ms), in ms. */
export function parseTime(v: string): number {
  const m = /^\s*(?:(\d+):)?(?:(\d+):)?(\d+(?:\.\d+)?)\s*$/.exec(v);
  if (!m) throw new InvalidArgumentError(`expected a time as seconds (12.5) or [hh:]mm:ss[.ms] but received ${JSON.stringify(v)}`);
  const parts = [m[1], m[2], m[3]].filter((p): p is string => p !== undefined).map(Number);
  const s = parts.reduce((a, p) => a * 60 + p, 0);
  return Math.round(s * 1000);
}

export function detectCommand(ctx: CliContext): Command {
  const cmd = new Command('detect')
    .description('detect objects in images and videos: files, directories, globs, stream addresses, cameras or - (stdin)')
    .argument('<inputs...>', 'image or video files (told apart by content), directories (--recursive for subdirectories), globs, http(s):// image URLs, rtsp:// rtmp:// srt:// udp:// tcp:// or http(s)://….m3u8 streams, /dev/videoN cameras, or - for stdin')
    .addOption(new Option('--threshold <t>', 'keep detections with score > t').argParser(parseThreshold).default(0.5))
    .addOption(new Option('--max-detections <n>', 'keep at most n detections per image (highest scores)').argParser(intParser(1, 300)).default(100))
    .addOption(new Option('--classes <names>', 'keep only these classes: names or ids, comma-separated (cat,dog)').argParser(parseClasses))
    .addOption(new Option('--class-thresholds <pairs>', 'a threshold per class instead of --threshold: name or id:threshold, comma-separated (person:0.4,3:0.7); the other classes keep --threshold').argParser(parseClassThresholds))
    .addOption(new Option('--mask-format <format>', 'segmentation models: each detection\'s "mask" as COCO RLE ({"size": [h, w], "counts": "..."}, pycocotools\' compressed counts), polygon (COCO polygons: outer contours in image pixel-corner coordinates) or none (no masks, none drawn by --save); as /predict mask_format. Ignored by detection models').choices(MASK_FORMATS).default('rle'))
    .option('--raw', 'include raw logits [300][91] and pred_boxes [300][4] (as /predict return_raw; no mask logits)')
    .option('--json', 'stdout: one compact JSON line per image (the /predict response plus "image") and per video frame (plus "source", "frame", "pts_ms"), nothing else')
    .option('--save <dir>', 'write annotated copies into dir: JPEG for .jpg/.jpeg images, PNG for other images, H.264 video (audio copied) for videos')
    .option('-r, --recursive', 'also take images and videos from subdirectories of directory inputs')
    .option('--url <url>', 'send the images to a running server (rfdetr serve) instead of starting an engine')
    .addOption(new Option('--vid-stride <n>', 'videos: process every n-th frame').argParser(intParser(1, 10_000)))
    .addOption(new Option('--max-frames <n>', 'videos: stop after n processed frames').argParser(intParser(1, Number.MAX_SAFE_INTEGER)))
    .addOption(new Option('--start <time>', 'videos: start at this time (seconds or [hh:]mm:ss)').argParser(parseTime))
    .addOption(new Option('--duration <time>', 'videos: process at most this much (seconds or [hh:]mm:ss)').argParser(parseTime))
    .addOption(new Option('--open-timeout <ms>', 'videos and streams: longest wait for the source to answer and for each frame').argParser(intParser(1, 3_600_000)).default(15_000))
    .option('--no-drop', 'live streams: keep every frame when the engine falls behind (default: drop the oldest waiting frame)')
    .option('--track', 'videos: add ByteTrack track ids ("track_id" on each detection, "#id" in saved labels)');
  addTrackerOptions(cmd);
  addEngineOptions(cmd);
  cmd.addHelpText('after', `${EXIT_HELP}\n\nAn input that names nothing (missing path, empty directory, glob matching nothing) or an image or video that cannot be read or decoded is reported and skipped (no JSON line); the others still run and the exit status is 1. Ctrl-C or SIGTERM finishes the frame in flight, closes saved videos and exits 0. Videos need ffmpeg (Debian package ffmpeg).`);
  return cmd.action(async (inputs: string[], f: DetectFlags, c: Command) => (await import('./detect-run.ts')).runDetect(ctx, inputs, f, c));
}
