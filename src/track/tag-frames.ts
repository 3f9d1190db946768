// Track ids onto frames shaped like `rfdetr detect --json` / POST /predict/video lines: each frame's
// detections get `track_id` (a number, or null where the tracker gives none), in place, order and count kept.
// One ByteTrack per `source`, so the lines of several videos (interleaved or not) are tracked apart and each
// source's ids start at 0.
import { ByteTrack, type ByteTrackOptions, type TrackInput } from './bytetrack.ts';

export interface TrackableFrame {
  source?: unknown;
  detections: (TrackInput & { track_id?: number | null })[];
}

export class FrameTagger {
  private readonly trackers = new Map<unknown, ByteTrack>();
  private readonly options: Partial<ByteTrackOptions>;

  /** Throws (E_USAGE) on options ByteTrack rejects, before any frame. */
  constructor(options: Partial<ByteTrackOptions> = {}) {
    this.options = options;
    new ByteTrack(options);
  }

  /** Adds `track_id` to every detection of `frame`; frames of one source must come in order. */
  tag<F extends TrackableFrame>(frame: F): F {
    let bt = this.trackers.get(frame.source);
    if (!bt) {
      bt = new ByteTrack(this.options);
      this.trackers.set(frame.source, bt);
    }
    const ids = bt.update(frame.detections);
    frame.detections.forEach((d, i) => {
      d.track_id = ids[i] ?? null;
    });
    return frame;
  }
}
