// The schemas of POST /predict/video (TypeBox, like schema.ts, and part of /openapi.json): its options — the
// /predict fields a video can use (threshold, max_detections, classes, mask_format) plus stride and track, from the query
// string or multipart text fields — and the NDJSON lines it answers with.
import { Type, type TSchema } from '@sinclair/typebox';
import { expected, PredictParamsProps, type Validated } from '../detect/params-schema.ts';
import { Detection, ErrorCode } from './schema.ts';
import { fromTextFields, precompile, validate } from './validate.ts';

export const MAX_VIDEO_STRIDE = 1000;

export const VideoParamsProps = {
  threshold: PredictParamsProps.threshold,
  max_detections: PredictParamsProps.max_detections,
  classes: PredictParamsProps.classes,
  stride: Type.Optional(Type.Integer({
    minimum: 1, maximum: MAX_VIDEO_STRIDE, default: 1,
    description: 'run every Nth frame (1 = every frame); the lines keep the source frame index',
    ...expected(`an integer between 1 and ${MAX_VIDEO_STRIDE} (inclusive; default 1)`),
  })),
  track: Type.Optional(Type.Boolean({
    default: false,
    description: 'add ByteTrack track ids (track_id on every detection; null where the tracker gives none)',
    ...expected('a boolean (default false)', { 'x-expected-text': 'a boolean (true/false/1/0; default false)' }),
  })),
  mask_format: PredictParamsProps.mask_format,
  model: PredictParamsProps.model,
};

export const VideoParamsOnly = Type.Object(VideoParamsProps, {
  additionalProperties: false,
  description: 'POST /predict/video options (query string, or multipart text fields)',
});
precompile(VideoParamsOnly);

/** The options after validation (wire names; the defaults filled in). */
export type VideoParams = Validated<typeof VideoParamsProps> & { stride: number; track: boolean };

/** Validates the text fields (query parameters or multipart fields) into VideoParams, or throws the 422. */
export function parseVideoParams(fields: Record<string, unknown>): VideoParams {
  return validate<VideoParams>(VideoParamsOnly, fromTextFields(fields, VideoParamsOnly), fields);
}

const ms = (description: string) => Type.Number({ description });

export const VideoFrameLine = Type.Object({
  frame: Type.Integer({ minimum: 0, description: 'index of the frame in the video, from 0 (with stride N: 0, N, 2N, …)' }),
  pts_ms: Type.Number({ description: 'presentation time of the frame, ms from the start' }),
  image_size: Type.Object({ width: Type.Integer({ minimum: 1 }), height: Type.Integer({ minimum: 1 }) }),
  detections: Type.Array(Type.Intersect([Detection, Type.Object({
    track_id: Type.Optional(Type.Union([Type.Integer({ minimum: 0 }), Type.Null()], { description: 'only with track: the ByteTrack track, or null where the tracker gives none' })),
  })]), { description: 'sorted by score descending, as in /predict' }),
  num_detections: Type.Integer({ minimum: 0 }),
  timing_ms: Type.Object({
    decode: ms('0 but for the reservation\'s bookkeeping: ffmpeg decoded the frame (its CPU time is charged to the client\'s fair share instead)'),
    preprocess: ms('resize and normalise, measured in the sidecar'),
    inference: ms('the engine forward, measured in the sidecar'),
    postprocess: ms('scores, threshold, sort, boxes'),
    total: ms('from the frame being taken from the decoder to its detections'),
    queue: ms('waiting for the pixel budget and the engine (behind other requests\' images and frames)'),
    transfer: ms('the sidecar round trip minus preprocess and forward'),
  }, { description: 'the stages of a /predict image\'s timing_ms, in its order; milliseconds, not rounded' }),
}, { description: 'one line per processed frame, in order, written as soon as the frame is done' });

export const VideoSummaryLine = Type.Object({
  summary: Type.Object({
    frames: Type.Integer({ minimum: 0, description: 'frame lines written' }),
    stride: Type.Integer({ minimum: 1 }),
    detections: Type.Integer({ minimum: 0, description: 'over all frame lines' }),
    width: Type.Integer(),
    height: Type.Integer(),
    fps: Type.Number({ description: 'the video\'s frame rate (ffprobe)' }),
    tracked: Type.Boolean(),
    elapsed_ms: ms('from the first frame asked for to the last line'),
    frames_per_s: Type.Number(),
    inference_ms: ms('sum of the frames\' engine forward times'),
  }),
}, { description: 'the last line of a video that was processed to its end' });

export const VideoErrorLine = Type.Object({
  error: Type.Object({
    detail: Type.String(),
    code: ErrorCode,
    status: Type.Integer({ description: 'the HTTP status this error has before any line is written' }),
    request_id: Type.String(),
  }, { additionalProperties: true }),
}, { description: 'the last line instead of the summary when the run fails after lines were written (an engine failure, the drain, the deadline)' });

/** The video components of /openapi.json, by name. */
export const VIDEO_COMPONENTS = { VideoParams: VideoParamsOnly, VideoFrameLine, VideoSummaryLine, VideoErrorLine } as const satisfies Record<string, TSchema>;
