// ByteTrack (Zhang et al., ECCV 2022): multi-object tracking by associating every detection box, the
// low-score ones included, to Kalman-predicted tracks, one frame at a time.
//
// Defaults, association and the track life cycle follow roboflow trackers 2.6.1's `ByteTrackTracker` in its
// fixed-rate mode (no timestamps), so the same detections get the same tracks:
//   1. every track predicts one frame ahead;
//   2. detections with score ≥ highConfDetThreshold are matched to all tracks by IoU (optimal assignment,
//      maximising IoU; a pair below minimumIouThreshold is no match);
//   3. the remaining detections are matched to the tracks step 2 left over, the same way;
//   4. an unmatched high-score detection with score ≥ trackActivationThreshold starts a tentative track;
//   5. a track gets an id once it has minimumConsecutiveFrames consecutive matches (its first box counts);
//      a tentative track that misses a frame is dropped, a confirmed one after more than
//      ceil(lostTrackBuffer · frameRate / 30) frames without a match.
// Matching is class-agnostic, as in the reference: `label_id` does not take part.
// The IoU is computed in double precision and rounded to single precision before it is compared or
// assigned, because the reference's IoU matrix is float32 (supervision's box_iou_batch).
import { RfdetrError } from '../errors.ts';
import { MAX_DETECTIONS_LIMIT } from '../detect/params-schema.ts';
import { linearSumAssignment } from './assignment.ts';
import { BoxKalman, type Box4 } from './kalman.ts';

export interface ByteTrackOptions {
  /** Frames (at 30 fps) a lost track is kept for re-association; scaled by frameRate / 30. */
  lostTrackBuffer: number;
  /** The video's frame rate, frames per second. */
  frameRate: number;
  /** Minimum score for an unmatched detection to start a track. */
  trackActivationThreshold: number;
  /** Consecutive matched frames before a track gets an id. */
  minimumConsecutiveFrames: number;
  /** Minimum IoU between a predicted track box and a detection for them to match. */
  minimumIouThreshold: number;
  /** Score splitting the first (high) and second (low) association stages. */
  highConfDetThreshold: number;
}

export const BYTETRACK_DEFAULTS: Readonly<ByteTrackOptions> = Object.freeze({
  lostTrackBuffer: 30,
  frameRate: 30,
  trackActivationThreshold: 0.7,
  minimumConsecutiveFrames: 2,
  minimumIouThreshold: 0.1,
  highConfDetThreshold: 0.6,
});

/**
 * Detections one frame may have: the most a frame of `rfdetr detect` or /predict/video has (max_detections ≤
 * 300). The assignment's cost grows about as n³ in the boxes of a frame and with the tracks they leave behind:
 * heavily overlapping boxes that move, on this host (CPU per frame, over 4 to 40 frames): 300 boxes 10–60 ms,
 * 2,000 up to 0.63 s, 4,000 up to 1.7 s and rising frame by frame (the red team: 4,000 took 9.4 s, 20,000 never
 * finished). More is an error, never a silent truncation: which boxes to drop is the caller's choice.
 */
export const MAX_TRACK_DETECTIONS = MAX_DETECTIONS_LIMIT;

export interface TrackInput {
  /** [x1, y1, x2, y2] in pixels. */
  box: readonly [number, number, number, number];
  score: number;
  label_id: number;
}

interface Track {
  kf: BoxKalman;
  id: number; // -1 until confirmed
  sinceUpdate: number;
  consecutive: number;
}

export class ByteTrack {
  readonly options: Readonly<ByteTrackOptions>;
  private readonly maxFramesLost: number;
  private tracks: Track[] = [];
  private nextId = 0;

  constructor(opts: Partial<ByteTrackOptions> = {}) {
    const o = { ...BYTETRACK_DEFAULTS, ...opts };
    checkOption('lostTrackBuffer', o.lostTrackBuffer, 'an integer ≥ 0', Number.isInteger(o.lostTrackBuffer) && o.lostTrackBuffer >= 0);
    checkOption('frameRate', o.frameRate, 'a finite number > 0', Number.isFinite(o.frameRate) && o.frameRate > 0);
    checkOption('minimumConsecutiveFrames', o.minimumConsecutiveFrames, 'an integer ≥ 1', Number.isInteger(o.minimumConsecutiveFrames) && o.minimumConsecutiveFrames >= 1);
    for (const k of ['trackActivationThreshold', 'minimumIouThreshold', 'highConfDetThreshold'] as const) {
      checkOption(k, o[k], 'a number in [0, 1]', Number.isFinite(o[k]) && o[k] >= 0 && o[k] <= 1);
    }
    this.options = Object.freeze(o);
    this.maxFramesLost = o.lostTrackBuffer === 0 ? 0 : Math.max(1, Math.ceil((o.frameRate / 30) * o.lostTrackBuffer));
  }

  /** Tracks one frame's detections: the id of each detection's track, or null where there is none, in order. */
  update(dets: readonly TrackInput[]): (number | null)[] {
    const out: (number | null)[] = new Array<number | null>(dets.length).fill(null);
    if (this.tracks.length === 0 && dets.length === 0) return out;
    if (dets.length > MAX_TRACK_DETECTIONS) {
      throw new RfdetrError('E_USAGE', `ByteTrack: a frame has ${dets.length} detections; at most ${MAX_TRACK_DETECTIONS} per frame are tracked (the most a detection frame has), as the assignment grows as n³: keep the ${MAX_TRACK_DETECTIONS} best-scoring of the frame first`, { detections: dets.length, max_detections: MAX_TRACK_DETECTIONS });
    }
    for (const d of dets) checkDetection(d);

    for (const t of this.tracks) {
      t.kf.predict();
      if (t.sinceUpdate > 0) t.consecutive = 0;
      t.sinceUpdate += 1;
    }
    const predicted = this.tracks.map((t) => t.kf.box());
    const high: number[] = [];
    const low: number[] = [];
    dets.forEach((d, i) => (d.score >= this.options.highConfDetThreshold ? high : low).push(i));

    const first = this.associate(
      this.tracks.map((_, k) => k),
      predicted,
      high,
      dets,
    );
    for (const [k, i] of first.matched) out[i] = this.match(this.tracks[k]!, dets[i]!.box);
    const second = this.associate(first.unmatchedTracks, predicted, low, dets);
    for (const [k, i] of second.matched) out[i] = this.match(this.tracks[k]!, dets[i]!.box);

    for (const i of first.unmatchedDets) {
      if (dets[i]!.score >= this.options.trackActivationThreshold) {
        this.tracks.push({ kf: new BoxKalman(dets[i]!.box), id: -1, sinceUpdate: 0, consecutive: 1 });
      }
    }
    const minFrames = this.options.minimumConsecutiveFrames;
    this.tracks = this.tracks.filter(
      (t) => t.sinceUpdate <= this.maxFramesLost && (t.id !== -1 || t.consecutive >= minFrames || t.sinceUpdate === 0),
    );
    return out;
  }

  /** Forgets every track and restarts ids from 0 (a new video). */
  reset(): void {
    this.tracks = [];
    this.nextId = 0;
  }

  private match(t: Track, box: Box4): number | null {
    t.kf.update(box);
    t.sinceUpdate = 0;
    t.consecutive += 1;
    if (t.id === -1 && t.consecutive >= this.options.minimumConsecutiveFrames) t.id = this.nextId++;
    return t.id === -1 ? null : t.id;
  }

  /** Optimal IoU assignment of `trackIdx` (boxes from `predicted`) to `detIdx`; unmatched lists ascending. */
  private associate(trackIdx: readonly number[], predicted: readonly Box4[], detIdx: readonly number[], dets: readonly TrackInput[]) {
    const matched: [number, number][] = [];
    const nT = trackIdx.length;
    const nD = detIdx.length;
    const usedT = new Uint8Array(nT);
    const usedD = new Uint8Array(nD);
    if (nT > 0 && nD > 0) {
      const iou = new Float32Array(nT * nD);
      for (let a = 0; a < nT; a++) {
        for (let b = 0; b < nD; b++) iou[a * nD + b] = supervisionIou(predicted[trackIdx[a]!]!, dets[detIdx[b]!]!.box);
      }
      const min = Math.fround(this.options.minimumIouThreshold);
      const { rows, cols } = linearSumAssignment(iou, nT, nD, true);
      rows.forEach((a, k) => {
        const b = cols[k]!;
        if (iou[a * nD + b]! >= min) {
          matched.push([trackIdx[a]!, detIdx[b]!]);
          usedT[a] = 1;
          usedD[b] = 1;
        }
      });
    }
    return {
      matched,
      unmatchedTracks: trackIdx.filter((_, a) => !usedT[a]),
      unmatchedDets: detIdx.filter((_, b) => !usedD[b]),
    };
  }
}

/** IoU as supervision's box_iou_batch computes it: areas unclamped, 0 when the union is not positive. */
function supervisionIou(a: Box4, b: Box4): number {
  const iw = Math.max(0, Math.min(a[2], b[2]) - Math.max(a[0], b[0]));
  const ih = Math.max(0, Math.min(a[3], b[3]) - Math.max(a[1], b[1]));
  const inter = iw * ih;
  const union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter;
  return union > 0 ? inter / union : 0;
}

function checkOption(name: string, value: unknown, expected: string, ok: boolean): void {
  if (!ok) throw new RfdetrError('E_USAGE', `ByteTrack: expected ${expected} for ${name} but received ${String(value)}`);
}

function checkDetection(d: TrackInput): void {
  const finite = Array.isArray(d.box) && d.box.length === 4 && d.box.every((v) => typeof v === 'number' && Number.isFinite(v));
  if (!finite || typeof d.score !== 'number' || !Number.isFinite(d.score)) {
    throw new RfdetrError('E_USAGE', `ByteTrack: expected a detection {box: [x1, y1, x2, y2] finite numbers, score: finite number} but received ${JSON.stringify(d)}`);
  }
}
