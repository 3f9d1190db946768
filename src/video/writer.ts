// Annotated video out: raw RGB24 frames piped into one ffmpeg process that encodes H.264 (libx264) at the
// source's frame rate, with the source's audio copied in when it has some. The container follows the input
// where it can hold H.264 (mp4/mov → fragmented MP4, MPEG-TS → MPEG-TS, everything else → Matroska), and every
// one of these stays playable when cut short: a run killed outright (even SIGKILL: ffmpeg then reads the end
// of its input and closes the file) leaves a valid video of the frames written so far.
//
// The file is opened here (O_EXCL | O_NOFOLLOW, after refusing a destination that is not ours) and handed to
// ffmpeg as a file descriptor, so ffmpeg never follows a link planted in the output directory.
import fs from 'node:fs';
import { execa, type ResultPromise } from 'execa';
import { RfdetrError } from '../errors.ts';
import { ffmpegMissing, ffmpegPrograms, isMissingExecutable } from './ffmpeg.ts';
import { lastLine } from './probe.ts';

export type VideoContainer = 'mp4' | 'mpegts' | 'matroska';

/** The container and file extension for an annotated copy of a video named `name` (by its extension). */
export function outputFormatFor(name: string): { container: VideoContainer; ext: string } {
  const ext = /\.([A-Za-z0-9]+)$/.exec(name)?.[1]?.toLowerCase() ?? '';
  if (ext === 'mp4' || ext === 'm4v' || ext === 'mov') return { container: 'mp4', ext: `.${ext}` };
  if (ext === 'ts' || ext === 'm2ts' || ext === 'mts') return { container: 'mpegts', ext: `.${ext}` };
  return { container: 'matroska', ext: '.mkv' };
}

export interface VideoWriterOptions {
  /** Destination path: created here, never followed through a link. */
  path: string;
  width: number;
  height: number;
  /** Frames per second of the output (the source's, divided by the stride). */
  fps: number;
  container: VideoContainer;
  /** Copy the first audio stream of this input (a file), cut as the video was. */
  audioFrom?: { input: string; startMs?: number; durationMs?: number };
  /** x264 preset (default veryfast). */
  preset?: string;
  env?: NodeJS.ProcessEnv;
}

export interface VideoWriter {
  readonly frames: number;
  /** Queues one frame (width × height × 3 bytes); resolves when ffmpeg has room for more. */
  write(rgb: Uint8Array): Promise<void>;
  /** Ends the input and waits for ffmpeg to close the file. */
  finish(): Promise<void>;
  /** Ends ffmpeg and removes the file. */
  abort(): Promise<void>;
}

const MUXER: Record<VideoContainer, string[]> = {
  mp4: ['-movflags', '+frag_keyframe+empty_moov+default_base_moof', '-f', 'mp4'],
  mpegts: ['-f', 'mpegts'],
  matroska: ['-f', 'matroska'],
};

export function openVideoWriter(o: VideoWriterOptions): VideoWriter {
  const fd = fs.openSync(o.path, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL | fs.constants.O_NOFOLLOW, 0o644);
  const audio = o.audioFrom
    ? [
      ...(o.audioFrom.startMs ? ['-ss', (o.audioFrom.startMs / 1000).toFixed(3)] : []),
      ...(o.audioFrom.durationMs !== undefined ? ['-t', (o.audioFrom.durationMs / 1000).toFixed(3)] : []),
      '-i', o.audioFrom.input,
    ]
    : [];
  const args = [
    '-hide_banner', '-nostdin', '-nostats', '-loglevel', 'error',
    '-f', 'rawvideo', '-pix_fmt', 'rgb24', '-s', `${o.width}x${o.height}`, '-framerate', String(o.fps > 0 ? o.fps : 30), '-i', 'pipe:0',
    ...audio,
    '-map', '0:v:0', ...(o.audioFrom ? ['-map', '1:a:0?', '-c:a', 'copy'] : []),
    '-c:v', 'libx264', '-preset', o.preset ?? 'veryfast', '-pix_fmt', 'yuv420p',
    // Odd sizes cannot be 4:2:0: pad by one pixel rather than fail.
    '-vf', 'pad=ceil(iw/2)*2:ceil(ih/2)*2',
    ...MUXER[o.container], 'pipe:3',
  ];
  const { ffmpeg } = ffmpegPrograms(o.env);
  // Its own process group: a Ctrl-C at the terminal reaches this process, which finishes the file, and not
  // ffmpeg, which would close it before the last frames were written.
  const proc = execa(ffmpeg, args, {
    // execa passes a numeric descriptor through to the child as is; its types only name the stream forms.
    stdio: ['pipe', 'ignore', 'pipe', fd as unknown as 'pipe'], buffer: { stderr: true }, reject: false, detached: true, env: o.env,
  }) as unknown as ResultPromise;
  fs.closeSync(fd);
  let frames = 0;
  let broken: Error | null = null;
  const stdin = proc.stdin!;
  stdin.on('error', (e) => (broken ??= e));
  const failure = async (): Promise<RfdetrError> => {
    const r = (await proc) as { exitCode?: number; signal?: string; stderr?: string; code?: string; cause?: unknown };
    if (isMissingExecutable(r) || isMissingExecutable(r.cause)) return ffmpegMissing(ffmpeg, r.cause);
    return new RfdetrError('E_INTERNAL', `writing ${o.path} failed (ffmpeg exit ${r.exitCode ?? r.signal}: ${lastLine(String(r.stderr ?? ''))})`);
  };
  return {
    get frames() {
      return frames;
    },
    async write(rgb) {
      if (broken) throw await failure();
      frames++;
      if (!stdin.write(rgb)) {
        await new Promise<void>((resolve) => {
          const done = () => {
            stdin.off('drain', done);
            stdin.off('close', done);
            resolve();
          };
          stdin.on('drain', done);
          stdin.on('close', done);
          // ffmpeg gone (its exit is the error below): nothing will drain.
          void proc.finally(done);
        });
      }
      if (broken) throw await failure();
    },
    async finish() {
      stdin.end();
      const r = (await proc) as { exitCode?: number };
      if (r.exitCode !== 0) throw await failure();
    },
    async abort() {
      proc.kill('SIGKILL');
      await proc.catch(() => {});
      fs.rmSync(o.path, { force: true });
    },
  };
}
