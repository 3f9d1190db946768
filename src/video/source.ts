// A video frame source: one ffmpeg process decoding a file, a URL or a byte stream to raw RGB24 frames on a
// pipe, yielded one at a time as an async iterable with the pipe's backpressure (ffmpeg stops decoding while
// nobody reads, so memory stays bounded whatever the source's length). Each frame's buffer is exactly
// width × height × 3 bytes, ready for the sidecar's u8 image frame: no image codec, no extra copy.
//
// Per-frame size and timestamp come from ffmpeg's `showinfo` filter on stderr (checksums off), matched in
// order with the frames on stdout: the exact pts of variable-frame-rate sources, and a size change in a live
// stream is seen rather than misread as shifted bytes. A stream given as bytes (an upload, stdin) is spooled
// to a private temporary directory first, so containers with their index at the end (most phone MP4s) work;
// close() ends ffmpeg and removes that directory.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { execa, type ResultPromise } from 'execa';
import { RfdetrError } from '../errors.ts';
import { MAX_IMAGE_SIDE } from '../image/limits.ts';
import { ffmpegMissing, ffmpegPrograms, isMissingExecutable } from './ffmpeg.ts';
import { lastLine, probeVideo, renamed, type VideoInfo } from './probe.ts';
import { processCpuMs } from './process-cpu.ts';

export interface VideoFrame {
  /** Index in the decoded sequence (from --start, counting the frames --vid-stride skips). */
  index: number;
  /** Presentation time in ms from the start of the source. */
  ptsMs: number;
  width: number;
  height: number;
  /** RGB24, row-major, width × height × 3 bytes. */
  rgb: Buffer;
}

export interface OpenVideoOptions {
  /** Yield every stride-th frame (1 = all); the others are skipped inside ffmpeg, before the RGB conversion. */
  stride?: number;
  /** Stop after this many yielded frames. */
  maxFrames?: number;
  /** Seek to this time before decoding. */
  startMs?: number;
  /** Decode at most this much of the source. */
  durationMs?: number;
  /** Aborting ends ffmpeg; the iteration then throws E_ABORTED. */
  signal?: AbortSignal;
  /**
   * Longest wait in ms for ffprobe's answer and for each frame while the consumer is waiting (the first one
   * includes connecting). Past it ffmpeg is ended and the iteration throws E_VIDEO_TIMEOUT. Default 15000.
   */
  timeoutMs?: number;
  /**
   * Skip ffprobe (live streams: probing would open a second connection, and a live source has no length).
   * `info` then holds only what ffmpeg says once the first frame arrives.
   */
  noProbe?: boolean;
  /** For a stream input: refuse (E_VIDEO_TOO_LARGE) past this many bytes while spooling. */
  maxBytes?: number;
  /**
   * For a stream input in a container ffmpeg reads front to back (MPEG-TS, Matroska, FLV, Y4M, MPEG-PS):
   * hand the stream to ffmpeg's stdin as it arrives instead of spooling it first, so an endless pipe is
   * decoded while it flows. Implies noProbe (ffprobe would consume the stream).
   */
  pipe?: boolean;
  env?: NodeJS.ProcessEnv;
  /** How messages name the input, as is (default: the input, quoted); ffmpeg's own words have the path replaced by it. */
  name?: string;
}

export interface VideoSource extends AsyncIterable<VideoFrame> {
  /** ffprobe's description (null with noProbe). */
  readonly info: VideoInfo | null;
  /** Frames per second ffmpeg reported for the decoded stream (0 until known); the probe's fps when probed. */
  readonly fps: number;
  /** Frames yielded so far. */
  readonly frames: number;
  /** Ends ffmpeg (if running) and removes the temporary files; safe to call more than once. */
  close(): Promise<void>;
  /**
   * The CPU time the decoder has used so far, ms (ffmpeg's every thread; ~10 ms steps), or null where it cannot
   * be known (not Linux, not started, already reaped: the last figure read stays).
   */
  decoderCpuMs?(): number | null;
}

interface FrameHeader {
  n: number;
  ptsTime: number;
  width: number;
  height: number;
}

const SHOWINFO = /\bn:\s*(\d+)\s+pts:\s*(\S+)\s+pts_time:(\S+).*?\bs:(\d+)x(\d+)/;
const CONFIG_RATE = /config in .*frame_rate: (\d+)\/(\d+)/;

function shown(input: string): string {
  return JSON.stringify(input.length > 200 ? `${input.slice(0, 200)}…` : input);
}

/** ffmpeg's time syntax for ms. */
function seconds(ms: number): string {
  return (ms / 1000).toFixed(3);
}

/** Input options that give network protocols a read timeout of their own, so ffmpeg does not wait forever either. */
function networkOptions(input: string, timeoutMs: number): string[] {
  const us = String(Math.max(1, Math.round(timeoutMs)) * 1000);
  if (/^rtsp:\/\//i.test(input)) return ['-timeout', us];
  if (/^(tcp|http|https|rtmp|srt|udp):\/\//i.test(input)) return ['-rw_timeout', us];
  return [];
}

/** Copies `stream` into a new private directory, failing past maxBytes; returns the file's path. */
async function spool(stream: NodeJS.ReadableStream, maxBytes: number | undefined, signal: AbortSignal | undefined): Promise<{ dir: string; file: string }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rfdetr-video-'));
  const file = path.join(dir, 'input');
  let seen = 0;
  const cap = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      seen += chunk.length;
      if (maxBytes !== undefined && seen > maxBytes) {
        cb(new RfdetrError('E_VIDEO_TOO_LARGE', `the video is over ${maxBytes} bytes; send a shorter or smaller video`, { limit: maxBytes }));
      } else cb(null, chunk);
    },
  });
  try {
    await pipeline(stream as Readable, cap, fs.createWriteStream(file, { mode: 0o600, flags: 'wx' }), { signal });
  } catch (e) {
    fs.rmSync(dir, { recursive: true, force: true });
    if ((e as Error).name === 'AbortError') throw new RfdetrError('E_ABORTED', 'reading the video was aborted');
    throw e;
  }
  if (seen === 0) {
    fs.rmSync(dir, { recursive: true, force: true });
    throw new RfdetrError('E_VIDEO_UNDECODABLE', 'the video is empty (0 bytes); expected a video file');
  }
  return { dir, file };
}

/** Opens `input` (a path or URL, or a byte stream) for decoding; probes it unless told not to. */
export async function openVideo(input: string | NodeJS.ReadableStream, opts: OpenVideoOptions = {}): Promise<VideoSource> {
  let tmpDir: string | null = null;
  let target: string;
  if (typeof input === 'string') target = input;
  else if (opts.pipe) return new FfmpegSource('pipe:0', 'the video stream', null, opts, () => {}, input);
  else {
    const s = await spool(input, opts.maxBytes, opts.signal);
    tmpDir = s.dir;
    target = s.file;
  }
  const removeTmp = () => {
    if (tmpDir) fs.rmSync(tmpDir, { recursive: true, force: true });
    tmpDir = null;
  };
  let info: VideoInfo | null = null;
  if (!opts.noProbe) {
    try {
      info = await probeVideo(target, { timeoutMs: opts.timeoutMs, signal: opts.signal, env: opts.env, ...(opts.name === undefined ? {} : { name: opts.name }) });
    } catch (e) {
      removeTmp();
      throw e;
    }
  }
  return new FfmpegSource(target, typeof input === 'string' ? input : 'the video stream', info, opts, removeTmp);
}

class FfmpegSource implements VideoSource {
  readonly info: VideoInfo | null;
  fps: number;
  frames = 0;
  #proc: ResultPromise | null = null;
  #closed = false;
  #why: RfdetrError | null = null;
  readonly #headers: FrameHeader[] = [];
  #headerWaiter: (() => void) | null = null;
  #stderrDone = false;
  readonly #tail: string[] = [];
  #timer: NodeJS.Timeout | null = null;
  #leftover: Buffer | null = null;
  #truncated = false;
  readonly #onAbort = () => this.#stop(new RfdetrError('E_ABORTED', `decoding ${this.label} was aborted`));

  /** How messages name the input (opts.name, else `name` quoted). */
  readonly label: string;
  constructor(readonly target: string, readonly name: string, info: VideoInfo | null, readonly opts: OpenVideoOptions, readonly removeTmp: () => void, readonly stdin: NodeJS.ReadableStream | null = null) {
    this.label = opts.name ?? shown(name);
    this.info = info;
    this.fps = info?.fps ?? 0;
  }

  #args(): string[] {
    const o = this.opts;
    const stride = Math.max(1, Math.floor(o.stride ?? 1));
    const timeoutMs = o.timeoutMs ?? 15_000;
    const filters = [...(stride > 1 ? [`select=not(mod(n\\,${stride}))`] : []), 'showinfo=checksum=0'];
    return [
      '-hide_banner', '-nostdin', '-nostats', '-loglevel', 'info',
      ...networkOptions(this.target, timeoutMs),
      ...(o.startMs ? ['-ss', seconds(o.startMs)] : []),
      // An input option: the filters (showinfo) then see only the frames that are output.
      ...(o.durationMs !== undefined ? ['-t', seconds(o.durationMs)] : []),
      '-i', this.target,
      '-map', '0:v:0', '-an', '-sn', '-dn',
      '-vf', filters.join(','),
      '-fps_mode', 'passthrough',
      ...(o.maxFrames !== undefined ? ['-frames:v', String(o.maxFrames)] : []),
      '-f', 'rawvideo', '-pix_fmt', 'rgb24', 'pipe:1',
    ];
  }

  #start(): ResultPromise {
    const { ffmpeg } = ffmpegPrograms(this.opts.env);
    // Its own process group: a Ctrl-C at the terminal is for the caller to handle (finish the current frame).
    const proc = execa(ffmpeg, this.#args(), { stdin: this.stdin ? 'pipe' : 'ignore', stdout: 'pipe', stderr: 'pipe', buffer: false, reject: false, detached: true, env: this.opts.env });
    if (this.stdin) {
      // ffmpeg stops reading when it has the frames it was asked for (or fails): what is left unsent is not an error.
      proc.stdin!.on('error', () => {});
      (this.stdin as Readable).on('error', (e) => this.#stop(new RfdetrError('E_VIDEO_UNDECODABLE', `reading ${this.label} failed: ${e.message}`)));
      (this.stdin as Readable).pipe(proc.stdin!);
    }
    const rl = readline.createInterface({ input: proc.stderr! });
    rl.on('line', (line) => {
      const m = SHOWINFO.exec(line);
      if (m) {
        this.#headers.push({ n: Number(m[1]), ptsTime: Number(m[3]), width: Number(m[4]), height: Number(m[5]) });
      } else {
        const r = CONFIG_RATE.exec(line);
        if (r && !this.info && Number(r[2]) > 0) this.fps = Number(r[1]) / Number(r[2]);
        if (/partial file|moov atom not found/.test(line)) this.#truncated = true;
        if (!line.includes('Parsed_showinfo') && !/^\s|^frame=|^video:/.test(line)) {
          this.#tail.push(line);
          if (this.#tail.length > 40) this.#tail.shift();
        }
      }
      this.#wake();
    });
    rl.on('close', () => {
      this.#stderrDone = true;
      this.#wake();
    });
    this.opts.signal?.addEventListener('abort', this.#onAbort, { once: true });
    return proc;
  }

  #wake(): void {
    const w = this.#headerWaiter;
    this.#headerWaiter = null;
    w?.();
  }

  #cpuMs: number | null = null;

  decoderCpuMs(): number | null {
    const now = processCpuMs(this.#proc?.pid);
    if (now !== null) this.#cpuMs = now;
    return this.#cpuMs;
  }

  #stop(why: RfdetrError): void {
    this.#why ??= why;
    this.#proc?.kill('SIGKILL');
    this.#wake();
  }

  #arm(): void {
    const ms = this.opts.timeoutMs ?? 15_000;
    this.#timer = setTimeout(() => {
      this.#stop(new RfdetrError('E_VIDEO_TIMEOUT', `${this.label} sent no frame for ${ms} ms${this.frames === 0 ? ' (nothing arrived since it was opened)' : ` after ${this.frames} frames`}; expected a source that is sending. Check it, or allow longer with --open-timeout`, { timeoutMs: ms }));
    }, ms);
  }

  #disarm(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
  }

  async #nextHeader(): Promise<FrameHeader | null> {
    for (;;) {
      if (this.#why) throw this.#why;
      const h = this.#headers.shift();
      if (h) return h;
      if (this.#stderrDone) return null;
      await new Promise<void>((resolve) => (this.#headerWaiter = resolve));
    }
  }

  /**
   * Exactly `n` bytes from ffmpeg's stdout, or what was left when it ended (shorter, maybe empty). A chunk
   * that holds a whole frame at its start is used as is; otherwise the frame is assembled (one copy).
   */
  async #read(chunks: AsyncIterator<Buffer>, n: number): Promise<Buffer> {
    let out: Buffer | null = null;
    let filled = 0;
    while (filled < n) {
      if (this.#why) throw this.#why;
      let c = this.#leftover;
      this.#leftover = null;
      if (!c) {
        const r = await chunks.next();
        if (this.#why) throw this.#why;
        if (r.done) break;
        c = r.value;
      }
      if (!out && c.length >= n) {
        if (c.length > n) this.#leftover = c.subarray(n);
        return c.subarray(0, n);
      }
      out ??= Buffer.allocUnsafe(n);
      const take = Math.min(c.length, n - filled);
      c.copy(out, filled, 0, take);
      filled += take;
      if (take < c.length) this.#leftover = c.subarray(take);
    }
    return out ? out.subarray(0, filled) : Buffer.alloc(0);
  }

  async #failure(): Promise<RfdetrError> {
    const r = (await this.#proc!) as { exitCode?: number; signal?: string; code?: string; cause?: unknown };
    if (isMissingExecutable(r) || isMissingExecutable(r.cause)) return ffmpegMissing(ffmpegPrograms(this.opts.env).ffmpeg, r.cause);
    if (this.#truncated) return this.#truncatedError();
    // The first line ffmpeg marked as coming from a demuxer or decoder ("[h264 @ 0x…] …") says what was wrong;
    // its closing "Conversion failed!" does not.
    const cause = this.#tail.find((l) => /^\[[\w,]+ @ 0x[0-9a-f]+\]|^Error/.test(l)) ?? this.#tail[this.#tail.length - 1] ?? 'no message';
    return new RfdetrError('E_VIDEO_UNDECODABLE', `${this.label} could not be decoded${this.frames ? ` after ${this.frames} frames` : ''} (ffmpeg exit ${r.exitCode ?? r.signal}: ${renamed(cause.trim(), this.target, this.label)}); expected a complete video file or a stream ffmpeg can read`);
  }

  #truncatedError(): RfdetrError {
    return new RfdetrError('E_VIDEO_UNDECODABLE', `${this.label} is truncated: it ends inside its data${this.frames ? ` after ${this.frames} decodable frames` : ' before any whole frame'}${this.info?.frameCount ? ` (its header promises ${this.info.frameCount})` : ''}; expected a complete video file (was the copy or upload cut short?)`, { frames: this.frames });
  }

  async *[Symbol.asyncIterator](): AsyncIterator<VideoFrame> {
    if (this.#closed || this.#proc) throw new Error('a VideoSource can be iterated once');
    if (this.opts.signal?.aborted) throw new RfdetrError('E_ABORTED', `decoding ${this.label} was aborted`);
    this.#proc = this.#start();
    const chunks = (this.#proc.stdout! as Readable)[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
    const stride = Math.max(1, Math.floor(this.opts.stride ?? 1));
    const max = this.opts.maxFrames;
    try {
      for (;;) {
        // ffmpeg's filters run a frame ahead of -frames:v, so the count is kept here, not read from its exit.
        if (max !== undefined && this.frames >= max) return;
        this.#arm();
        let h: FrameHeader | null;
        let rgb: Buffer;
        try {
          h = await this.#nextHeader();
          if (!h) {
            const rest = await this.#read(chunks, 1);
            if (rest.length) throw new RfdetrError('E_INTERNAL', 'ffmpeg wrote frame bytes that showinfo did not announce');
            break;
          }
          if (h.width > MAX_IMAGE_SIDE || h.height > MAX_IMAGE_SIDE || h.width <= 0 || h.height <= 0) {
            this.#stop(new RfdetrError('E_VIDEO_TOO_LARGE', `${this.label}: frame ${h.n} is ${h.width}x${h.height} pixels; each side must be at most ${MAX_IMAGE_SIDE} pixels`, { width: h.width, height: h.height, limit: MAX_IMAGE_SIDE }));
            throw this.#why!;
          }
          const size = h.width * h.height * 3;
          rgb = await this.#read(chunks, size);
          // A frame the filters saw but the output did not take (ffmpeg's exit says whether that was an error).
          if (rgb.length === 0) break;
          if (rgb.length !== size) {
            this.#disarm();
            throw await this.#failure();
          }
        } finally {
          this.#disarm();
        }
        this.frames++;
        // showinfo prints pts_time to 6 digits: microseconds are all there is.
        const ptsMs = Math.round(((Number.isFinite(h.ptsTime) ? h.ptsTime : 0) * 1000 + (this.opts.startMs ?? 0)) * 1000) / 1000;
        yield { index: h.n * stride, ptsMs, width: h.width, height: h.height, rgb };
      }
      const r = (await this.#proc) as { exitCode?: number; signal?: string };
      if (this.#why) throw this.#why;
      if (r.exitCode !== 0) throw await this.#failure();
      if (this.#truncated) throw this.#truncatedError();
    } finally {
      await this.close();
    }
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#disarm();
    this.opts.signal?.removeEventListener('abort', this.#onAbort);
    (this.stdin as Readable | null)?.unpipe();
    if (this.#proc) {
      this.#proc.kill('SIGKILL');
      // Unread output would keep the pipes, and so the process's promise, open forever.
      this.#proc.stdout?.destroy();
      this.#proc.stderr?.destroy();
      await this.#proc.catch(() => {});
    }
    this.removeTmp();
  }
}
