// An infer input turned into the request's fields, checked before anything is sent: the sides the sidecar
// accepts, the byte counts the input's form needs, for an image file whether this sidecar decodes it
// (E_SIDECAR_DECLINED otherwise: the caller then decodes it and sends `image`), and a row selection's values.
import { RfdetrError } from '../errors.ts';
import { f32Bytes, MAX_FRAME_BYTES, MAX_IMAGE_SIDE, type WireImage, type WireImageEncoded, type WireImageShm, type WireSelect } from '../protocol/codec.ts';
import type { EncodedImage, RowSelect, SidecarInfo } from './backend.ts';
import type { RgbImage } from '../image/decode.ts';
import type { DecoderCaps } from './decoder-caps.ts';

export type RequestFields = { image?: WireImage; pixel_values?: Uint8Array; image_shm?: WireImageShm; image_encoded?: WireImageEncoded; select?: WireSelect };

/** The most file bytes one frame carries: the frame cap less the 64 KiB it keeps for the envelope. */
const MAX_ENCODED_BYTES = MAX_FRAME_BYTES - 65536;

/** E_USAGE unless both sides are whole numbers from 1 to MAX_IMAGE_SIDE (what the sidecar accepts). */
export function checkSides(width: number, height: number): void {
  if (!(Number.isInteger(width) && Number.isInteger(height) && width >= 1 && height >= 1 && width <= MAX_IMAGE_SIDE && height <= MAX_IMAGE_SIDE)) {
    throw new RfdetrError('E_USAGE', `image must be 1 to ${MAX_IMAGE_SIDE} pixels on each side, got ${width}×${height}`);
  }
}

/** An image file for the sidecar to decode. */
export function encodedFields(e: EncodedImage, decoders: DecoderCaps): RequestFields {
  const { format, width, height, bytes } = e;
  if (format !== 'jpeg' && format !== 'png') {
    throw new RfdetrError('E_USAGE', `an encoded image's format must be 'jpeg' or 'png', got '${String(format)}'`);
  }
  checkSides(width, height);
  if (bytes.byteLength === 0) throw new RfdetrError('E_USAGE', `the ${format} file is empty; send the whole file`);
  if (!decoders.decodes(format)) {
    throw new RfdetrError('E_SIDECAR_DECLINED', `this sidecar does not decode ${format} files (${decoders.whyNot()}); decode the image and send it as { image }`, { format });
  }
  if (bytes.byteLength > MAX_ENCODED_BYTES) {
    throw new RfdetrError('E_SIDECAR_DECLINED', `the ${format} file is ${bytes.byteLength} bytes, over the ${MAX_ENCODED_BYTES} one frame carries; decode the image and send it as { image }`, { format });
  }
  return { image_encoded: { format, width, height, bytes } };
}

/** A decoded image's pixels, sent in the frame (RGB u8, width·height·3 bytes). */
export function imageFields(image: RgbImage): RequestFields {
  const { width, height, data } = image;
  if (data.length !== width * height * 3) {
    throw new RfdetrError('E_USAGE', `image data must hold ${width}×${height}×3 = ${width * height * 3} bytes (RGB u8), got ${data.length}`);
  }
  return { image: { width, height, rgb: data } };
}

/** Prepared pixel_values, f32 [3,S,S] as the hello's input shape says. */
export function pixelFields(pixelValues: Float32Array, inputShape: SidecarInfo['inputShape']): RequestFields {
  const [c, h, w] = inputShape;
  const want = c * h * w;
  if (pixelValues.length !== want) {
    throw new RfdetrError('E_USAGE', `pixel_values must hold ${c}×${h}×${w} = ${want} floats, got ${pixelValues.length}`);
  }
  return { pixel_values: f32Bytes(pixelValues) };
}

const isProbability = (v: number) => typeof v === 'number' && v >= 0 && v <= 1;
const isIndex = (v: number) => Number.isInteger(v) && v >= 0 && v <= 0xffffffff;

/**
 * A row selection as the request carries it (E_USAGE naming the value when one is out of range), or nothing
 * when the sidecar has no selected output: a sidecar without one ignores it, and one that predates `select`
 * would refuse the key.
 */
export function selectFields(select: RowSelect | undefined, info: Pick<SidecarInfo, 'outputs'>): RequestFields {
  if (!select || !info.outputs.some((o) => o.rows === 'selected')) return {};
  const { threshold, max, classes, classThresholds } = select;
  if (!isProbability(threshold)) throw new RfdetrError('E_USAGE', `select.threshold must be a number from 0 to 1, got ${threshold}`);
  if (!isIndex(max)) throw new RfdetrError('E_USAGE', `select.max must be a whole number from 0 to ${0xffffffff}, got ${max}`);
  const bad = classes?.find((c) => !isIndex(c));
  if (bad !== undefined) throw new RfdetrError('E_USAGE', `select.classes must hold class indices (whole numbers from 0), got ${bad}`);
  const wire: WireSelect = { threshold, max, ...(classes ? { classes: [...classes] } : {}) };
  if (classThresholds?.size) {
    const byId: Record<string, number> = {};
    for (const [id, t] of classThresholds) {
      if (!isIndex(id)) throw new RfdetrError('E_USAGE', `select.classThresholds must be keyed by class indices (whole numbers from 0), got ${id}`);
      if (!isProbability(t)) throw new RfdetrError('E_USAGE', `select.classThresholds of class ${id} must be a number from 0 to 1, got ${t}`);
      byId[String(id)] = t;
    }
    wire.class_thresholds = byId;
  }
  return { select: wire };
}
