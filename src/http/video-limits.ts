// The POST /predict/video limits and their defaults (the serve flags --video-max-*). Kept apart from the
// route so `rfdetr serve --help` and the OpenAPI document can read them without loading it.

export interface VideoLimits {
  /** Bytes of one uploaded video; more → 413. */
  maxBytes: number;
  /** Seconds of video; longer → 422. */
  maxDurationS: number;
  /** Frames in the video; more → 422. */
  maxFrames: number;
  /** Videos processed at once; more → 503. */
  maxVideos: number;
  /** The upload must arrive within this many ms → else 408. */
  bodyTimeoutMs: number;
}

export const DEFAULT_VIDEO_LIMITS: VideoLimits = {
  maxBytes: 256 * 1024 * 1024,
  maxDurationS: 600,
  maxFrames: 36_000,
  maxVideos: 2,
  bodyTimeoutMs: 300_000,
};
