// What a video is, from ffprobe (the header and stream tables; nothing is decoded): size as displayed (after
// the rotation ffmpeg applies when decoding), frame rate, frame count and duration when the container says,
// rotation, audio, codec and container. Refuses what is not a video, and a frame size over the image limit,
// before any frame is decoded.
import { execa } from 'execa';
import { RfdetrError } from '../errors.ts';
import { MAX_IMAGE_SIDE } from '../image/limits.ts';
import { ffmpegMissing, ffmpegPrograms, isMissingExecutable } from './ffmpeg.ts';

export interface VideoInfo {
  /** Frame size as decoded (rotation applied: a 1920×1080 stream tagged 90° is 1080×1920). */
  width: number;
  height: number;
  /** Frames per second (avg_frame_rate, else r_frame_rate); 0 when the stream does not say. */
  fps: number;
  /** Frames in the stream when the container records it (nb_frames), else estimated from duration × fps. */
  frameCount?: number;
  durationMs?: number;
  /** Display rotation in degrees clockwise (0, 90, 180, 270). */
  rotation: number;
  hasAudio: boolean;
  /** Video codec name (h264, vp9, …). */
  codec: string;
  /** Container format name(s) as ffprobe gives them (e.g. "mov,mp4,m4a,3gp,3g2,mj2", "matroska,webm"). */
  container: string;
}

export interface ProbeOptions {
  /** Kill ffprobe and fail with E_VIDEO_TIMEOUT after this many ms (a stream that never answers). Default 15000. */
  timeoutMs?: number;
  signal?: AbortSignal;
  env?: NodeJS.ProcessEnv;
  /**
   * How messages name the input, as is (default: the input, quoted). The server names an upload so that its
   * temporary path never reaches a client; ffprobe's own words have the path replaced by it too.
   */
  name?: string;
}

interface FfprobeStream {
  codec_type?: string;
  codec_name?: string;
  width?: number;
  height?: number;
  avg_frame_rate?: string;
  r_frame_rate?: string;
  nb_frames?: string;
  duration?: string;
  tags?: Record<string, string>;
  side_data_list?: { rotation?: number }[];
}
interface FfprobeOutput {
  streams?: FfprobeStream[];
  format?: { format_name?: string; duration?: string };
}

const TEXT_FORMATS = new Set(['tty', 'bin', 'xbin', 'adf', 'idf']);
const TEXT_CODECS = new Set(['ansi', 'bintext', 'xbin', 'idf']);

function rate(s: string | undefined): number {
  const m = /^(\d+)\/(\d+)$/.exec(s ?? '');
  if (!m || Number(m[2]) === 0) return 0;
  return Number(m[1]) / Number(m[2]);
}

function shown(input: string): string {
  return JSON.stringify(input.length > 200 ? `${input.slice(0, 200)}…` : input);
}

/** The last meaningful line ffmpeg/ffprobe wrote on stderr. */
export function lastLine(stderr: string): string {
  const lines = stderr.split('\n').map((l) => l.trim()).filter(Boolean);
  return lines[lines.length - 1] ?? 'no message';
}

/** Display rotation (clockwise degrees) from the display matrix (ffprobe gives it counter-clockwise) or the old `rotate` tag. */
function rotationOf(s: FfprobeStream): number {
  const side = s.side_data_list?.find((d) => typeof d.rotation === 'number')?.rotation;
  const deg = side !== undefined ? -side : Number(s.tags?.rotate ?? 0);
  return ((Math.round(deg / 90) * 90) % 360 + 360) % 360;
}

/** `line` (ffmpeg's or ffprobe's words) with every occurrence of `input` replaced by `label`. */
export function renamed(line: string, input: string, label: string): string {
  return input === '' ? line : line.split(input).join(label);
}

export async function probeVideo(input: string, opts: ProbeOptions = {}): Promise<VideoInfo> {
  const { ffprobe } = ffmpegPrograms(opts.env);
  const label = opts.name ?? shown(input);
  const timeoutMs = opts.timeoutMs ?? 15_000;
  let stdout: string;
  try {
    const r = await execa(ffprobe, ['-v', 'error', '-print_format', 'json', '-show_format', '-show_streams', '-i', input], {
      timeout: timeoutMs, cancelSignal: opts.signal, stdin: 'ignore', maxBuffer: 16 * 1024 * 1024,
    });
    stdout = r.stdout;
  } catch (e) {
    const err = e as { timedOut?: boolean; isCanceled?: boolean; stderr?: string; cause?: unknown; code?: string };
    if (isMissingExecutable(err) || isMissingExecutable(err.cause)) throw ffmpegMissing(ffprobe, e);
    if (err.isCanceled) throw new RfdetrError('E_ABORTED', `probing ${label} was aborted`);
    if (err.timedOut) {
      throw new RfdetrError('E_VIDEO_TIMEOUT', `${label} did not answer within ${timeoutMs} ms (ffprobe read no stream header); expected a video file or a stream that is sending. Check the address, or allow longer with --open-timeout`, { timeoutMs });
    }
    throw new RfdetrError('E_VIDEO_UNDECODABLE', `${label} is not a readable video (ffprobe: ${renamed(lastLine(err.stderr ?? ''), input, label)}); expected a video file or stream (mp4, mkv, webm, mov, avi, MPEG-TS, …)`, undefined, { cause: e });
  }
  let out: FfprobeOutput;
  try {
    out = JSON.parse(stdout) as FfprobeOutput;
  } catch (e) {
    throw new RfdetrError('E_VIDEO_UNDECODABLE', `ffprobe gave unreadable output for ${label}`, undefined, { cause: e });
  }
  const streams = out.streams ?? [];
  const v = streams.find((s) => s.codec_type === 'video');
  if (!v) throw new RfdetrError('E_VIDEO_UNDECODABLE', `${label} has no video stream (${streams.map((s) => s.codec_type).join(', ') || 'no streams'}); expected a video`);
  const fmt = out.format?.format_name ?? 'unknown';
  // ffmpeg reads any text as ANSI art (the tty demuxer) and any still image as a one-frame "video".
  if (TEXT_FORMATS.has(fmt) || TEXT_CODECS.has(v.codec_name ?? '')) {
    throw new RfdetrError('E_VIDEO_UNDECODABLE', `${label} is not a video (ffprobe reads it as text: ${fmt}); expected a video file or stream (mp4, mkv, webm, mov, avi, MPEG-TS, …)`);
  }
  if (fmt === 'image2' || fmt.endsWith('_pipe')) {
    throw new RfdetrError('E_VIDEO_UNDECODABLE', `${label} is a still image (${fmt}), not a video; send it to /predict, or detect it as an image`);
  }
  const cw = v.width ?? 0;
  const ch = v.height ?? 0;
  if (!(cw > 0 && ch > 0)) throw new RfdetrError('E_VIDEO_UNDECODABLE', `${label}: the video stream declares a ${cw}x${ch} frame; expected a positive size`);
  if (cw > MAX_IMAGE_SIDE || ch > MAX_IMAGE_SIDE) {
    throw new RfdetrError('E_VIDEO_TOO_LARGE', `${label}: frames are ${cw}x${ch} pixels; each side must be at most ${MAX_IMAGE_SIDE} pixels (refused before decoding)`, { width: cw, height: ch, limit: MAX_IMAGE_SIDE });
  }
  const rotation = rotationOf(v);
  const swap = rotation === 90 || rotation === 270;
  const fps = rate(v.avg_frame_rate) || rate(v.r_frame_rate);
  const durS = Number(v.duration ?? out.format?.duration);
  const durationMs = Number.isFinite(durS) && durS > 0 ? durS * 1000 : undefined;
  const nb = Number(v.nb_frames);
  const frameCount = Number.isSafeInteger(nb) && nb > 0 ? nb : durationMs !== undefined && fps > 0 ? Math.round((durationMs / 1000) * fps) : undefined;
  return {
    width: swap ? ch : cw,
    height: swap ? cw : ch,
    fps,
    ...(frameCount !== undefined ? { frameCount } : {}),
    ...(durationMs !== undefined ? { durationMs } : {}),
    rotation,
    hasAudio: streams.some((s) => s.codec_type === 'audio'),
    codec: v.codec_name ?? 'unknown',
    container: fmt,
  };
}
