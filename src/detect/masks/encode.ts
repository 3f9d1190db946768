// One detection's `mask` for the response, in the requested format, from its mask logits: the upsample
// (columns.ts) streamed into the RLE encoder or the polygon tracer, one detection at a time, so the memory is
// one detection's runs, never an image per detection.
import { streamMask } from './columns.ts';
import type { MaskFormat } from './formats.ts';
import type { MaskGrid } from './grid.ts';
import { PolygonTracer, type Polygons } from './polygon.ts';
import { RleEncoder, rleToString, type RleMask } from './rle.ts';

export type { MaskFormat } from './formats.ts';

/** A detection's `mask`: COCO RLE, or COCO polygons (outer contours). */
export type Mask = RleMask | Polygons;

/** Encodes the masks of one image, one after the other, in `format`, reusing one encoder's buffers. */
export class MaskEncoder {
  private rle?: RleEncoder;
  private tracer?: PolygonTracer;
  constructor(readonly grid: MaskGrid, readonly format: Exclude<MaskFormat, 'none'>) {}

  encode(logits: Float32Array): Mask {
    const g = this.grid;
    if (this.format === 'polygon') {
      const t = (this.tracer ??= new PolygonTracer(g.width, g.height));
      t.reset();
      streamMask(logits, g, t);
      return t.finish();
    }
    const r = (this.rle ??= new RleEncoder(g.width, g.height));
    r.reset();
    streamMask(logits, g, r);
    return { size: [g.height, g.width], counts: rleToString(r.finish()) };
  }
}

/** The mask of `logits` (f32 M×M, M = grid.side) at the grid's image size as COCO RLE. */
export function maskRle(logits: Float32Array, grid: MaskGrid): RleMask {
  return new MaskEncoder(grid, 'rle').encode(logits) as RleMask;
}

/** The outer contours of the mask of `logits` at the grid's image size. */
export function maskPolygons(logits: Float32Array, grid: MaskGrid): Polygons {
  return new MaskEncoder(grid, 'polygon').encode(logits) as Polygons;
}
