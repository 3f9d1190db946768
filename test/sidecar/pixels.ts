// A deterministic, valid-length pixel_values input for sidecar tests.
export const PIXEL_COUNT = 3 * 560 * 560;

export function rampPixels(): Float32Array {
  const px = new Float32Array(PIXEL_COUNT);
  for (let i = 0; i < px.length; i++) px[i] = (i % 1000) * 0.001;
  return px;
}
