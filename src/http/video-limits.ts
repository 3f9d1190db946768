// The POST /predict/video limits and their defaults (the serve flags --video-*). Kept apart from the
// route so `rfdetr serve --help` and the OpenAPI document can read them without loading it.

export interface VideoLimits {
  /** Bytes of one uploaded video; more → 413. */
  maxBytes: number;
  /** Seconds of video; longer → 422. */
  maxDurationS: number;
  /** Frames in the video; more → 422. */
  maxFrames: number;
  /** Videos processed at once (a slot is taken once the upload is complete); more → 503. */
  maxVideos: number;
  /** The upload must arrive within this many ms → else 408. */
  bodyTimeoutMs: number;
  /** Uploads arriving at once, over all clients; more → 503. */
  maxUploads: number;
  /** Uploads one client may have arriving at once; more → 503. */
  clientUploads: number;
  /** Bytes of uploads on disk (arriving, or complete and running); undefined: videoDiskLimitOf(maxBytes). */
  diskLimit?: number | undefined;
  /** Bytes/s an upload must average after `uploadGraceMs`; slower → 408. */
  minUploadRate: number;
  uploadGraceMs: number;
}

/**
 * The minimum upload rate: 32 KiB/s (256 kbit/s, a poor mobile uplink) after 10 s. It only has to free an upload
 * place from a connection that has all but stopped: the body timeout already asks a 256 MiB video for 0.85 MiB/s,
 * and a 20 MB phone clip for 67 kB/s, so no upload that could finish in time is dropped by it before the
 * timeout would have dropped it, save one that averages under 32 KiB/s and is under 9.8 MB. Holding all 8
 * upload places for the 300 s then costs a sender 8 × 32 KiB/s.
 */
export const DEFAULT_MIN_UPLOAD_RATE = 32 * 1024;

export const DEFAULT_VIDEO_LIMITS = {
  maxBytes: 256 * 1024 * 1024,
  maxDurationS: 600,
  maxFrames: 36_000,
  maxVideos: 2,
  bodyTimeoutMs: 300_000,
  maxUploads: 8,
  clientUploads: 2,
  minUploadRate: DEFAULT_MIN_UPLOAD_RATE,
  uploadGraceMs: 10_000,
} as const satisfies VideoLimits;

/** The default --video-disk-limit: four videos at --video-max-bytes (1 GiB at the default), so one client's half holds two. */
export function videoDiskLimitOf(maxBytes: number): number {
  return 4 * maxBytes;
}
