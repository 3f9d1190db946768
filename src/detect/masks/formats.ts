// The `mask_format` values (a module of its own so the CLI's definitions load it without the mask code).
/** COCO RLE (the default), COCO polygons, or no masks. */
export const MASK_FORMATS = ['rle', 'polygon', 'none'] as const;
export type MaskFormat = (typeof MASK_FORMATS)[number];
