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

/**
 * The tracking decorator every runner's sink can wear (POST /predict/video, `rfdetr detect --track`): each
 * outcome's detections (`frameOf`; undefined: nothing to tag, e.g. a refused frame) get their `track_id` in
 * place before `sink` sees them. The tagger is made at the first tagged frame (a live source knows its
 * frame rate only once it has opened).
 */
export function trackingSink<O, R>(sink: (o: O) => R, frameOf: (o: O) => TrackableFrame | undefined, tagger: () => FrameTagger): (o: O) => R {
  let t: FrameTagger | undefined;
  return (o: O) => {
    const frame = frameOf(o);
    if (frame) (t ??= tagger()).tag(frame);
    return sink(o);
  };
}
