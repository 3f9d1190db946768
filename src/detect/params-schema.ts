// The /predict parameters (every field but the image), declared once as TypeBox schemas: the HTTP request
// schemas spread them (src/http/schema.ts), and `PredictParams`, the client's request and the detector's
// parameters are their static types, so a field is one edit here plus its behaviour. `x-expected` is the
// "Expected … for FIELD" text of the 422 a field gets (`x-expected-text` where multipart and query strings
// word it otherwise).
import { Type, type Static, type TObject, type TOptional, type TProperties, type TSchema } from '@sinclair/typebox';
import { MASK_FORMATS } from './masks/formats.ts';

export const DEFAULT_THRESHOLD = 0.5;
export const DEFAULT_MAX_DETECTIONS = 100;
export const MAX_DETECTIONS_LIMIT = 300;
export const expected = (text: string, extra: Record<string, unknown> = {}) => ({ 'x-expected': text, ...extra });

// A type-only mark: an optional field whose `default` ajv fills in (useDefaults), so it is present on every
// validated request. TypeBox keeps schema options out of the type, hence the mark.
declare const HasDefault: unique symbol;
type TDefaulted<T extends TSchema> = TOptional<T> & { readonly [HasDefault]: true };
const defaulted = <T extends TSchema>(t: T): TDefaulted<T> => Type.Optional(t) as TDefaulted<T>;

/** An object of `P` as validation leaves it: `Static`, with every defaulted field present. */
export type Validated<P extends TProperties> = Static<TObject<P>> & {
  -readonly [K in keyof P as P[K] extends { readonly [HasDefault]: true } ? K : never]-?: Static<P[K]>;
};

export const PredictParamsProps = {
  threshold: defaulted(Type.Number({
    minimum: 0, maximum: 1, default: DEFAULT_THRESHOLD,
    description: 'keep detections with sigmoid(logit) > threshold',
    ...expected(`a number between 0 and 1 (inclusive; default ${DEFAULT_THRESHOLD})`),
  })),
  max_detections: defaulted(Type.Integer({
    minimum: 1, maximum: MAX_DETECTIONS_LIMIT, default: DEFAULT_MAX_DETECTIONS,
    description: 'keep at most this many, highest scores first (after the class filter)',
    ...expected(`an integer between 1 and ${MAX_DETECTIONS_LIMIT} (inclusive; default ${DEFAULT_MAX_DETECTIONS})`),
  })),
  return_raw: defaulted(Type.Boolean({
    default: false,
    description: 'also return raw.logits [300][91] and raw.pred_boxes [300][4] (normalised cxcywh)',
    ...expected('a boolean (default false)', { 'x-expected-text': 'a boolean (true/false/1/0; default false)' }),
  })),
  classes: Type.Optional(Type.Array(
    Type.Union([Type.Integer({ minimum: 0 }), Type.String({ minLength: 1 })], expected('a class id (integer >= 0) or a label name')),
    {
      minItems: 1, maxItems: 91,
      description: 'keep only these classes: ids (17) or label names ("cat"), case-insensitive; applied before max_detections. In multipart fields and query strings: comma-separated (cat,dog,17)',
      ...expected('a non-empty array of class ids or label names (e.g. ["cat", 17])', { 'x-expected-text': 'class ids or label names separated by commas (e.g. cat,dog,17)' }),
    },
  )),
  class_thresholds: Type.Optional(Type.Record(
    Type.String({ minLength: 1 }),
    Type.Number({ minimum: 0, maximum: 1, ...expected('a number between 0 and 1 (inclusive)') }),
    {
      minProperties: 1, maxProperties: 91,
      description: 'a threshold per class, by label name ("person", case-insensitive) or id ("3"): a detection of that class is kept when its score > this instead of > threshold; the other classes keep threshold (upstream rfdetr\'s ClassThresholds). In multipart fields and query strings: person:0.4,3:0.7',
      ...expected('an object of class name or id → number 0..1 (e.g. {"person": 0.4, "3": 0.7})', { 'x-expected-text': 'class:threshold pairs separated by commas (e.g. person:0.4,3:0.7)' }),
    },
  )),
  fast_decode: defaulted(Type.Boolean({
    default: false,
    description: 'opt-in, changes pixels: decode a JPEG at least 3× the model input on both sides at 1/2, 1/4 or 1/8 scale (libjpeg DCT scaling) and resize it in the server (2.5–3.4× less decode CPU for a 12 MP photo); the default is the exact decode (SERVING.md, "Fast decode", has its measured effect). No effect on other formats, smaller JPEGs, or with return_image',
    ...expected('a boolean (default false)', { 'x-expected-text': 'a boolean (true/false/1/0; default false)' }),
  })),
  return_image: Type.Optional(Type.Union([Type.Literal('png'), Type.Literal('jpeg')], {
    description: 'also return the picture with the detections drawn on it (the drawing of `rfdetr detect --save`), base64 in annotated_image',
    ...expected('"png" or "jpeg" (default: no picture)'),
  })),
  mask_format: defaulted(Type.Union(MASK_FORMATS.map((f) => Type.Literal(f)), {
    default: 'rle',
    description: 'segmentation models: each detection\'s `mask` as COCO RLE (`{"size": [h, w], "counts": "..."}`, pycocotools\' compressed counts; the default), `polygon` (COCO polygons: the outer contours, each [x1, y1, x2, y2, ...] in image pixel-corner coordinates) or `none` (no `mask` and no mask work). Accepted and ignored by detection models',
    ...expected('"rle", "polygon" or "none" (default "rle")'),
  })),
  model: Type.Optional(Type.String({
    minLength: 1, maxLength: 256,
    description: 'which of the served models answers (GET /v1/models lists their ids; a variant\'s lower-case name such as rf-detr-base works too); default: the first. A name the server does not serve is a 404 naming the models served. Also taken from the query string (?model=ID) with any body',
    ...expected('the id of a model this server serves (GET /v1/models)'),
  })),
};

/** The /predict parameters after validation (wire names; the defaults filled in). */
export type PredictParams = Validated<typeof PredictParamsProps>;
