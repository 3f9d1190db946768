// Paints a mask streamed column by column (columns.ts) into a raw RGB24 image: each foreground pixel blended
// with one colour, out = (colour·α + pixel·(255 − α) + 127) / 255, as the annotation's overlay blends.
import type { ColumnSink } from './columns.ts';

export class MaskPainter implements ColumnSink {
  private readonly stride: number;
  /**
   * @param rgb the image (width × height × 3 bytes, row-major), painted in place
   * @param alpha 0..255
   */
  constructor(private readonly rgb: Uint8Array, readonly width: number, private readonly colour: readonly [number, number, number], private readonly alpha: number) {
    this.stride = width * 3;
  }

  column(x: number, runs: Int32Array, n: number): void {
    const [r, g, b] = this.colour;
    const a = this.alpha;
    const k = 255 - a;
    const ra = r * a + 127, ga = g * a + 127, ba = b * a + 127;
    const px = this.rgb;
    for (let t = 0; t < n; t++) {
      const end = runs[2 * t + 1]! * this.stride + x * 3;
      for (let o = runs[2 * t]! * this.stride + x * 3; o < end; o += this.stride) {
        px[o] = ((ra + px[o]! * k) / 255) | 0;
        px[o + 1] = ((ga + px[o + 1]! * k) / 255) | 0;
        px[o + 2] = ((ba + px[o + 2]! * k) / 255) | 0;
      }
    }
  }
}
