// Small test videos made by ffmpeg at test time (nothing large is committed), and the skip for machines
// without it.
import { execFileSync, spawnSync } from 'node:child_process';
import path from 'node:path';
import { requireAll } from './skip.ts';

/** Why video tests cannot run here (no ffmpeg/ffprobe), or null. */
export function ffmpegSkipReason(): string | null {
  for (const p of ['ffmpeg', 'ffprobe']) {
    const r = spawnSync(p, ['-version'], { stdio: 'ignore' });
    if (r.error || r.status !== 0) return `needs ${p} (Debian package ffmpeg: apt-get install -y ffmpeg)`;
  }
  return null;
}

/** A skip option for node:test honouring RFDETR_REQUIRE_ALL=1. */
export function videoSkip(): { skip?: string } {
  const reason = ffmpegSkipReason();
  return reason && !requireAll ? { skip: reason } : {};
}

export interface MakeVideo {
  width?: number;
  height?: number;
  frames?: number;
  fps?: number;
  /** lavfi source, e.g. "testsrc" (default) or "color=c=red". */
  source?: string;
  audio?: boolean;
  /** Codec and container arguments; default H.264 in whatever the extension says. */
  codec?: string[];
}

/** Writes `dir/name` from a lavfi test source; returns its path. */
export function makeVideo(dir: string, name: string, o: MakeVideo = {}): string {
  const w = o.width ?? 64;
  const h = o.height ?? 48;
  const fps = o.fps ?? 30;
  const frames = o.frames ?? 10;
  const src = o.source ?? 'testsrc';
  const out = path.join(dir, name);
  const ext = path.extname(name);
  const codec = o.codec ?? (ext === '.webm' ? ['-c:v', 'libvpx-vp9', '-deadline', 'realtime', '-cpu-used', '8'] : ['-c:v', 'libx264', '-preset', 'ultrafast', '-pix_fmt', 'yuv420p']);
  const audio = o.audio ? ['-f', 'lavfi', '-i', `sine=frequency=440:sample_rate=8000:duration=${frames / fps}`] : [];
  const audioCodec = o.audio ? (ext === '.webm' ? ['-c:a', 'libopus'] : ['-c:a', 'aac']) : [];
  execFileSync('ffmpeg', [
    '-v', 'error', '-y', '-f', 'lavfi', '-i', `${src}${src.includes('=') ? ':' : '='}size=${w}x${h}:rate=${fps}`, ...audio,
    '-frames:v', String(frames), ...codec, ...audioCodec, ...(ext === '.mp4' ? ['-movflags', '+faststart'] : []), out,
  ]);
  return out;
}

/** Frame count of a file's first video stream, decoded and counted by ffprobe. */
export function ffprobeFrames(file: string): number {
  const out = execFileSync('ffprobe', ['-v', 'error', '-count_frames', '-select_streams', 'v:0', '-show_entries', 'stream=nb_read_frames', '-of', 'csv=p=0', file], { encoding: 'utf8' });
  return Number(out.trim());
}
