// Annotated copies of an image (rfdetr detect --save): each detection's box, label and score drawn as an SVG
// overlay (rendered by sharp's librsvg over just the part of the image it covers) and blended onto the decoded
// RGB image here (the pixel grid the model saw, so boxes line up), encoded as PNG or JPEG. Blending in JS
// rather than with sharp's composite: 640×480 with ten boxes took 12.0 ms of CPU per frame through composite
// (7.4 of them for an empty overlay) against 6.6 ms rendered and blended here (same machine, load 5).
// A pure function of (image, detections, format) → bytes; layoutLabels says which labels found room.
//
// Readable on light and dark images: every box stroke is a saturated class colour laid over a wider dark
// outline, so it shows against white (outline) and black (colour) alike; labels are a filled colour tag with
// black or white text, whichever contrasts with the tag. Colours are fixed per class id (golden-angle hues),
// so the same class has the same colour in every image. Higher scores are drawn last (on top) and choose
// their label's place first; labels never overlap each other (layoutLabels).
//
// A segmentation detection's mask (the response's `mask`: COCO RLE streamed run by run into the pixels, or
// polygons filled) is painted first, under every box, in its box colour at alpha MASK_ALPHA; no mask image is
// made.
import sharp from 'sharp';
import type { Mask } from '../detect/masks/encode.ts';
import { MaskPainter, paintPolygons } from '../detect/masks/paint.ts';
import { streamRle } from '../detect/masks/rle.ts';
import type { RgbImage } from '../image/decode.ts';

export interface DrawableDetection {
  label: string;
  label_id: number;
  score: number;
  /** [x1, y1, x2, y2] in image pixels. */
  box: readonly [number, number, number, number] | readonly number[];
  /** A segmentation detection's mask at this image's size (the response's `mask`). */
  mask?: Mask | undefined;
}

/** The opacity of a painted mask (0..255): 0.4. */
export const MASK_ALPHA = 102;

/** Paints each detection's mask into `rgb` (the image's own size), lowest score first so higher ones lie on top. */
export function paintMasks(rgb: Uint8Array, width: number, height: number, detections: readonly DrawableDetection[]): void {
  const order = detections.map((d, i) => ({ d, i })).filter(({ d }) => d.mask).sort((a, b) => a.d.score - b.d.score || b.i - a.i);
  for (const { d } of order) {
    const mask = d.mask!;
    const colour = classColour(d.label_id);
    if (Array.isArray(mask)) {
      paintPolygons(rgb, width, height, mask, colour, MASK_ALPHA);
      continue;
    }
    const [h, w] = mask.size;
    if (h !== height || w !== width) throw new RangeError(`annotate: a ${w}×${h} mask on a ${width}×${height} image (the mask must be at the image's size)`);
    streamRle(mask, new MaskPainter(rgb, width, colour, MASK_ALPHA));
  }
}

export type Rgb = [number, number, number];

/** The colour of class `labelId`: hue by the golden angle, saturation 0.85, value 0.95. */
export function classColour(labelId: number): Rgb {
  const h = (((labelId * 137.508) % 360) + 360) % 360;
  const s = 0.85;
  const v = 0.95;
  const c = v * s;
  const x = c * (1 - Math.abs(((h / 60) % 2) - 1));
  const m = v - c;
  const [r, g, b] = h < 60 ? [c, x, 0] : h < 120 ? [x, c, 0] : h < 180 ? [0, c, x] : h < 240 ? [0, x, c] : h < 300 ? [x, 0, c] : [c, 0, x];
  return [Math.round((r + m) * 255), Math.round((g + m) * 255), Math.round((b + m) * 255)];
}

function hex([r, g, b]: Rgb): string {
  return `#${[r, g, b].map((v) => v.toString(16).padStart(2, '0')).join('')}`;
}

/** Black text on light tags, white on dark ones (relative luminance, sRGB weights). */
function textColourOn([r, g, b]: Rgb): string {
  return 0.2126 * r + 0.7152 * g + 0.0722 * b > 140 ? '#000000' : '#ffffff';
}

function escapeXml(s: string): string {
  return s.replace(/[<>&"']/g, (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', '"': '&quot;', "'": '&apos;' })[c]!);
}

/** Box stroke width in pixels for an image: 2 px up to ~500 px images, growing with the short side. */
export function strokeWidth(width: number, height: number): number {
  return Math.max(2, Math.round(Math.min(width, height) / 250));
}

export interface Rect {
  x: number;
  y: number;
  w: number;
  h: number;
}

export interface LabelPlacement {
  /** Index into the detections given. */
  index: number;
  text: string;
  rect: Rect;
  /** Above the box, or just inside its top edge (no room above: the image edge or another label). */
  where: 'above' | 'inside';
}

export interface LabelLayout {
  fontSize: number;
  placed: LabelPlacement[];
  /** Detections whose label fits nowhere without covering another label or leaving the image (box still drawn). */
  skipped: number[];
}

function overlaps(a: Rect, b: Rect): boolean {
  return a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;
}

function boxOf(d: DrawableDetection): [number, number, number, number] | null {
  const [x1, y1, x2, y2] = d.box as [number, number, number, number];
  return [x1, y1, x2, y2].every(Number.isFinite) ? [x1, y1, x2, y2] : null;
}

/**
 * Where each label tag goes. Highest scores choose first: above the box when that is inside the image and
 * clear of the tags already placed, else just inside the box's top edge (when the box is tall enough and that
 * is clear), else the label is skipped. Tags are never wider or taller than the image.
 */
export function layoutLabels(width: number, height: number, detections: readonly DrawableDetection[]): LabelLayout {
  const t = strokeWidth(width, height);
  const fontSize = Math.max(11, Math.round(Math.min(width, height) / 40));
  const tagH = Math.round(fontSize * 1.35);
  const order = detections.map((d, i) => ({ d, i })).sort((a, b) => b.d.score - a.d.score || a.i - b.i);
  const placed: LabelPlacement[] = [];
  const skipped: number[] = [];
  for (const { d, i } of order) {
    const box = boxOf(d);
    if (!box) continue;
    const [x1, y1, , y2] = box;
    const text = `${d.label} ${d.score.toFixed(2)}`;
    const tagW = Math.ceil(text.length * fontSize * 0.62) + 6;
    if (tagW > width || tagH > height) {
      skipped.push(i);
      continue;
    }
    const x = Math.min(Math.max(0, x1 - t / 2), width - tagW);
    const candidates: { where: LabelPlacement['where']; rect: Rect }[] = [];
    if (y1 - t / 2 - tagH >= 0) candidates.push({ where: 'above', rect: { x, y: y1 - t / 2 - tagH, w: tagW, h: tagH } });
    const insideY = Math.max(0, y1 + t / 2);
    if (y2 - insideY >= tagH && insideY + tagH <= height) candidates.push({ where: 'inside', rect: { x, y: insideY, w: tagW, h: tagH } });
    const free = candidates.find((c) => !placed.some((p) => overlaps(p.rect, c.rect)));
    if (free) placed.push({ index: i, text, rect: free.rect, where: free.where });
    else skipped.push(i);
  }
  skipped.sort((a, b) => a - b);
  return { fontSize, placed, skipped };
}

/** The SVG overlay (same size as the image) drawing `detections`: every box, then the labels `layout` placed. */
export function overlaySvg(width: number, height: number, detections: readonly DrawableDetection[], layout = layoutLabels(width, height, detections), view: Rect = { x: 0, y: 0, w: width, h: height }): string {
  const t = strokeWidth(width, height);
  const parts: string[] = [];
  // Boxes with higher scores on top; every label above every box, so no box hides a label.
  const order = detections.map((d, i) => ({ d, i })).sort((a, b) => a.d.score - b.d.score || b.i - a.i);
  for (const { d } of order) {
    const box = boxOf(d);
    if (!box) continue;
    const [x1, y1, x2, y2] = box;
    const col = classColour(d.label_id);
    const w = Math.max(0, x2 - x1);
    const h = Math.max(0, y2 - y1);
    parts.push(`<rect x="${x1}" y="${y1}" width="${w}" height="${h}" fill="none" stroke="#000000" stroke-opacity="0.75" stroke-width="${t + 2}"/>`);
    parts.push(`<rect x="${x1}" y="${y1}" width="${w}" height="${h}" fill="none" stroke="${hex(col)}" stroke-width="${t}"/>`);
  }
  const fontSize = layout.fontSize;
  for (const p of layout.placed) {
    const col = classColour(detections[p.index]!.label_id);
    const { x, y, w, h } = p.rect;
    parts.push(`<rect x="${x}" y="${y}" width="${w}" height="${h}" fill="${hex(col)}" stroke="#000000" stroke-opacity="0.6" stroke-width="1"/>`);
    parts.push(`<text x="${x + 3}" y="${y + h - Math.round(fontSize * 0.32)}" font-family="DejaVu Sans, Arial, sans-serif" font-size="${fontSize}" fill="${textColourOn(col)}">${escapeXml(p.text)}</text>`);
  }
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${view.w}" height="${view.h}" viewBox="${view.x} ${view.y} ${view.w} ${view.h}">${parts.join('')}</svg>`;
}

/** The part of the image the overlay draws on (whole pixels, inside the image), or null when it draws nothing there. */
export function overlayBounds(width: number, height: number, detections: readonly DrawableDetection[], layout: LabelLayout): Rect | null {
  // A stroke of width t+2 is centred on the box edge; one more pixel for antialiasing.
  const pad = (strokeWidth(width, height) + 2) / 2 + 1;
  let x0 = Infinity;
  let y0 = Infinity;
  let x1 = -Infinity;
  let y1 = -Infinity;
  const add = (ax: number, ay: number, bx: number, by: number, p: number) => {
    x0 = Math.min(x0, ax - p);
    y0 = Math.min(y0, ay - p);
    x1 = Math.max(x1, bx + p);
    y1 = Math.max(y1, by + p);
  };
  for (const d of detections) {
    const b = boxOf(d);
    if (b) add(Math.min(b[0], b[2]), Math.min(b[1], b[3]), Math.max(b[0], b[2]), Math.max(b[1], b[3]), pad);
  }
  for (const p of layout.placed) add(p.rect.x, p.rect.y, p.rect.x + p.rect.w, p.rect.y + p.rect.h, 2);
  const x = Math.max(0, Math.floor(x0));
  const y = Math.max(0, Math.floor(y0));
  const w = Math.min(width, Math.ceil(x1)) - x;
  const h = Math.min(height, Math.ceil(y1)) - y;
  return w > 0 && h > 0 ? { x, y, w, h } : null;
}

/** A copy of `image` with `detections` drawn on it (raw RGB24). */
async function drawn(image: RgbImage, detections: readonly DrawableDetection[]): Promise<Buffer> {
  const { width, height } = image;
  const out = Buffer.from(image.data);
  paintMasks(out, width, height, detections);
  const layout = layoutLabels(width, height, detections);
  const view = overlayBounds(width, height, detections, layout);
  if (!view) return out;
  const ov = await sharp(Buffer.from(overlaySvg(width, height, detections, layout, view))).ensureAlpha().raw().toBuffer({ resolveWithObject: true });
  if (ov.info.width !== view.w || ov.info.height !== view.h || ov.info.channels !== 4) {
    throw new Error(`the overlay rendered as ${ov.info.width}×${ov.info.height}×${ov.info.channels}, expected ${view.w}×${view.h}×4`);
  }
  const o = ov.data;
  for (let row = 0; row < view.h; row++) {
    let d = ((view.y + row) * width + view.x) * 3;
    let s = row * view.w * 4;
    for (let col = 0; col < view.w; col++, d += 3, s += 4) {
      const a = o[s + 3]!;
      if (a === 0) continue;
      if (a === 255) {
        out[d] = o[s]!;
        out[d + 1] = o[s + 1]!;
        out[d + 2] = o[s + 2]!;
        continue;
      }
      const k = 255 - a;
      out[d] = ((o[s]! * a + out[d]! * k + 127) / 255) | 0;
      out[d + 1] = ((o[s + 1]! * a + out[d + 1]! * k + 127) / 255) | 0;
      out[d + 2] = ((o[s + 2]! * a + out[d + 2]! * k + 127) / 255) | 0;
    }
  }
  return out;
}

export type ImageFormat = 'png' | 'jpeg';

/** The format an output file name asks for: .jpg/.jpeg → JPEG, anything else PNG (lossless). */
export function formatForName(name: string): ImageFormat {
  return /\.jpe?g$/i.test(name) ? 'jpeg' : 'png';
}

/**
 * `image` with `detections` drawn on it as raw RGB24 (a video frame for the encoder). With no detections the
 * image's own bytes are returned, uncopied.
 */
export async function annotateRaw(image: RgbImage, detections: readonly DrawableDetection[]): Promise<Uint8Array> {
  if (detections.length === 0) return image.data;
  return drawn(image, detections);
}

/** `image` with `detections` drawn on it (see layoutLabels for the labels), encoded as `format`. */
export async function annotate(image: RgbImage, detections: readonly DrawableDetection[], format: ImageFormat): Promise<Buffer> {
  const { width, height } = image;
  const pixels = detections.length > 0 ? await drawn(image, detections) : Buffer.from(image.data.buffer, image.data.byteOffset, image.data.length);
  const img = sharp(pixels, { raw: { width, height, channels: 3 } });
  return format === 'jpeg' ? img.jpeg({ quality: 90 }).toBuffer() : img.png().toBuffer();
}
