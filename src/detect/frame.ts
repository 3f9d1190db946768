// What the runner (frame-runner.ts) carries from a source to a sink, whoever made it: an image file to decode,
// decoded pixels or a tensor (src/sidecar/transport.ts FrameData: the backend's transport decides how each
// reaches the sidecar), and where it came from.
import type { EncodedImage, RgbImage } from '../image/decode.ts';
import type { InferInput } from '../sidecar/backend.ts';
import type { FrameData } from '../sidecar/transport.ts';

export type { FrameData };

export interface Frame {
  data: FrameData;
  /** Its place in its source (an image of a batch, a video's frame number). */
  index: number;
  /** A video frame's presentation time (ms). */
  ptsMs?: number;
  /** The source's name (a file, a stream address), for sinks that keep sources apart (tracking). */
  source?: string;
}

/** The image the pipeline (pipeline.ts detectDecoded) is given for what the transport sends: pixels or a file. */
export function imageOfInput(input: InferInput): RgbImage | EncodedImage {
  if ('encoded' in input) return input.encoded;
  if ('image' in input) return input.image;
  throw new Error('the detectors send images (pixels or a file), not pixel_values');
}
