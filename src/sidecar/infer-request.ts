// An infer input turned into the request's fields, checked before anything is sent: the sides the sidecar
// accepts, the byte counts the input's form needs, and for an image file whether this sidecar decodes it
// (E_SIDECAR_DECLINED otherwise: the caller then decodes it and sends `image`).
import { RfdetrError } from '../errors.ts';
import { f32Bytes, MAX_FRAME_BYTES, MAX_IMAGE_SIDE, type WireImage, type WireImageEncoded, type WireImageShm } from '../protocol/codec.ts';
import type { EncodedImage, SidecarInfo } from './backend.ts';
import type { RgbImage } from '../image/decode.ts';
import type { DecoderCaps } from './decoder-caps.ts';

export type RequestFields = { image?: WireImage; pixel_values?: Uint8Array; image_shm?: WireImageShm; image_encoded?: WireImageEncoded };

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
