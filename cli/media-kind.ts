// What an input is, from its first bytes (never its name): a still image (sharp decodes it), a video (ffmpeg
// decodes it), or a live source named by its address. Anything unrecognised goes the image way, whose decoder
// then says what it expected.
import fs from 'node:fs';

export type MediaKind = 'image' | 'video';

/** Extensions picked from directories and globs as videos (a file named explicitly is sniffed whatever its name). */
export const VIDEO_EXTENSIONS = new Set(['.mp4', '.m4v', '.mov', '.mkv', '.webm', '.avi', '.ts', '.m2ts', '.mts', '.mpg', '.mpeg', '.flv', '.y4m']);

/** Live sources: stream protocols, HLS playlists over http(s), V4L2 cameras. */
export function isLiveSource(input: string): boolean {
  return /^(rtsp|rtsps|rtmp|rtmps|srt|udp|tcp|rtp):\/\//i.test(input) || /^https?:\/\/[^?#]*\.m3u8(?:[?#]|$)/i.test(input) || /^\/dev\/video\d+$/.test(input);
}

/** Classifies the first bytes of a file or stream (at least 16; 400 or more lets MPEG-TS be recognised). */
export function sniffMedia(head: Uint8Array): MediaKind {
  const b = Buffer.from(head.buffer, head.byteOffset, head.length);
  const ascii = (at: number, s: string) => b.length >= at + s.length && b.toString('latin1', at, at + s.length) === s;
  if (ascii(0, '\x89PNG') || (b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) || ascii(0, 'GIF8') || (ascii(0, 'RIFF') && ascii(8, 'WEBP'))
    || ascii(0, 'II*\0') || ascii(0, 'MM\0*')) return 'image';
  // ISO BMFF (mp4, mov, m4v; not the AVIF/HEIF stills), Matroska/WebM, AVI, FLV, Y4M, MPEG-PS, MPEG-TS (sync bytes every 188).
  if (ascii(4, 'ftyp') && !/^(avif|avis|heic|heix|mif1|msf1)$/.test(b.toString('latin1', 8, 12))) return 'video';
  if (b[0] === 0x1a && b[1] === 0x45 && b[2] === 0xdf && b[3] === 0xa3) return 'video';
  if (ascii(0, 'RIFF') && ascii(8, 'AVI ')) return 'video';
  if (ascii(0, 'FLV') || ascii(0, 'YUV4MPEG2')) return 'video';
  if (b[0] === 0 && b[1] === 0 && b[2] === 1 && (b[3] === 0xba || b[3] === 0xb3)) return 'video';
  if (b.length >= 377 && b[0] === 0x47 && b[188] === 0x47 && b[376] === 0x47) return 'video';
  if (ascii(4, 'moov') || ascii(4, 'mdat') || ascii(4, 'wide') || ascii(4, 'free')) return 'video';
  return 'image';
}

/**
 * Whether a video's first bytes name a container ffmpeg reads front to back, so it can be decoded from a pipe
 * as it arrives (MPEG-TS, Matroska/WebM, FLV, Y4M, MPEG-PS). MP4/MOV and AVI may keep their index at the end:
 * those are spooled first.
 */
export function isStreamableVideo(head: Uint8Array): boolean {
  const b = Buffer.from(head.buffer, head.byteOffset, head.length);
  const ascii = (at: number, s: string) => b.length >= at + s.length && b.toString('latin1', at, at + s.length) === s;
  return (b[0] === 0x1a && b[1] === 0x45 && b[2] === 0xdf && b[3] === 0xa3) || ascii(0, 'FLV') || ascii(0, 'YUV4MPEG2')
    || (b[0] === 0 && b[1] === 0 && b[2] === 1 && (b[3] === 0xba || b[3] === 0xb3))
    || (b.length >= 377 && b[0] === 0x47 && b[188] === 0x47 && b[376] === 0x47);
}

/** Sniffs a file's first bytes; unreadable files go the image way (whose reader reports the error). */
export function fileKind(file: string): MediaKind {
  let fd: number;
  try {
    fd = fs.openSync(file, 'r');
  } catch {
    return 'image';
  }
  try {
    const head = Buffer.alloc(512);
    const n = fs.readSync(fd, head, 0, head.length, 0);
    return sniffMedia(head.subarray(0, n));
  } catch {
    return 'image';
  } finally {
    fs.closeSync(fd);
  }
}
