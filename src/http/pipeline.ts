// The image and detection stages the HTTP server runs around the engine, behind one small interface so a
// test or a bench can count, slow or replace them. The default is the project's own src/image + src/detect.
import { MAX_IMAGE_BYTES, MAX_IMAGE_SIDE, decodeImage, type RgbImage } from '../image/decode.ts';
import { preprocess } from '../image/preprocess.ts';
import { postprocess, rawToNested, type Detection, type PostprocessOptions, type RawOutputs } from '../detect/postprocess.ts';

export type { Detection, PostprocessOptions, RawOutputs, RgbImage };

export interface Pipeline {
  maxImageBytes: number;
  maxImageSide: number;
  /** Bytes → RGB u8 at the original size; RfdetrError E_IMAGE_UNDECODABLE / E_IMAGE_TOO_LARGE on bad input. */
  decode(bytes: Uint8Array): Promise<RgbImage>;
  /** RGB → pixel_values f32 [3,560,560]. */
  preprocess(img: RgbImage): Float32Array | Promise<Float32Array>;
  postprocess(raw: RawOutputs, opts: PostprocessOptions): Detection[];
  /** [numQueries][numClasses] logits and [numQueries][4] pred_boxes as nested arrays of full-precision numbers. */
  rawToNested(raw: RawOutputs): { logits: number[][]; pred_boxes: number[][] };
}

export function defaultPipeline(): Pipeline {
  return {
    maxImageBytes: MAX_IMAGE_BYTES,
    maxImageSide: MAX_IMAGE_SIDE,
    decode: decodeImage,
    preprocess: (img) => preprocess(img),
    postprocess,
    rawToNested: (raw) => rawToNested(raw.logits, raw.predBoxes, raw.numQueries, raw.numClasses),
  };
}
