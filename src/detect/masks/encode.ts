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

/** The mask of `logits` (f32 M×M, M = grid.side) at the grid's image size as COCO RLE. */
export function maskRle(logits: Float32Array, grid: MaskGrid): RleMask {
  const rle = new RleEncoder(grid.width, grid.height);
  streamMask(logits, grid, rle);
  return { size: [grid.height, grid.width], counts: rleToString(rle.finish()) };
}

/** The outer contours of the mask of `logits` at the grid's image size. */
export function maskPolygons(logits: Float32Array, grid: MaskGrid): Polygons {
  const tracer = new PolygonTracer(grid.width, grid.height);
  streamMask(logits, grid, tracer);
  return tracer.finish();
}

/** The mask in `format` ('rle' or 'polygon'). */
export function encodeMask(logits: Float32Array, grid: MaskGrid, format: Exclude<MaskFormat, 'none'>): Mask {
  return format === 'polygon' ? maskPolygons(logits, grid) : maskRle(logits, grid);
}
