// The tracker's flags (ByteTrack's parameters, named as roboflow trackers names them), shared by every
// command that tracks, and their mapping onto ByteTrack options.
import { InvalidArgumentError, Option, type Command } from 'commander';
import { BYTETRACK_DEFAULTS, type ByteTrackOptions } from '../src/track/bytetrack.ts';
import { intParser, parseThreshold } from './parsers.ts';

/** The tracker's flags as commander gives them: ByteTrack's options by the same names. */
export type TrackerFlags = ByteTrackOptions;

function frameRate(v: string): number {
  const n = Number(v);
  if (v.trim() === '' || !Number.isFinite(n) || n <= 0) throw new InvalidArgumentError(`expected frames per second > 0 but received ${JSON.stringify(v)}`);
  return n;
}

/** --lost-track-buffer, --frame-rate, --track-activation-threshold, --minimum-consecutive-frames, … */
export function addTrackerOptions(cmd: Command): Command {
  const d = BYTETRACK_DEFAULTS;
  return cmd
    .addOption(new Option('--lost-track-buffer <frames>', 'frames (at 30 fps) a lost track is kept for re-association').argParser(intParser(0, 100_000)).default(d.lostTrackBuffer))
    .addOption(new Option('--frame-rate <fps>', 'the frames\' rate: scales --lost-track-buffer (detect on a video: the video\'s fps over --vid-stride unless given)').argParser(frameRate).default(d.frameRate))
    .addOption(new Option('--track-activation-threshold <t>', 'minimum score for an unmatched detection to start a track').argParser(parseThreshold).default(d.trackActivationThreshold))
    .addOption(new Option('--minimum-consecutive-frames <n>', 'consecutive matched frames before a track gets an id').argParser(intParser(1, 10_000)).default(d.minimumConsecutiveFrames))
    .addOption(new Option('--minimum-iou-threshold <t>', 'minimum IoU between a track\'s predicted box and a detection to match').argParser(parseThreshold).default(d.minimumIouThreshold))
    .addOption(new Option('--high-conf-det-threshold <t>', 'score splitting the first (high) and second (low) association stages').argParser(parseThreshold).default(d.highConfDetThreshold));
}

/** ByteTrack's options out of a command's flags (which may hold other flags too). */
export function trackerOptions(f: TrackerFlags): ByteTrackOptions {
  const keys = Object.keys(BYTETRACK_DEFAULTS) as (keyof ByteTrackOptions)[];
  return Object.fromEntries(keys.map((k) => [k, f[k]])) as unknown as ByteTrackOptions;
}
