// The size of a PNG or JPEG read from its first bytes, synchronously, so the decoder can reserve the pixels'
// memory without a round trip through sharp's thread pool for `metadata()` (0.5–3 ms a request on this
// 2-core host, measured by the request timeline). Only the plain cases are answered; anything else
// (another format, 16-bit grey PNG whose tRNS chunk would give it an alpha band, 12-bit JPEG, a height left
// to a DNL marker, a header that does not parse) returns undefined and the caller asks sharp, which stays
// the authority on what is decodable: a file whose header reads here but whose data is corrupt still fails
// in sharp's decode. `sidecarForm` reads the same header and says whether the sidecar's own decoder takes the
// file (the forms it decodes bit-identically to sharp's decode here).

export interface ImageHeader {
  format: 'png' | 'jpeg';
  width: number;
  height: number;
}

/** What sidecarForm needs beyond the size: PNG's depth, colour type and interlace; JPEG's component count. */
type Parsed = ImageHeader & ({ format: 'png'; depth: number; colour: number; interlaced: boolean } | { format: 'jpeg'; components: number });

const PNG_SIGNATURE = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];
const PNG_COLOR_DEPTHS: Record<number, number[]> = { 0: [1, 2, 4, 8, 16], 2: [8, 16], 3: [1, 2, 4, 8], 4: [8, 16], 6: [8, 16] };

function be32(b: Uint8Array, i: number): number {
  return ((b[i]! << 24) | (b[i + 1]! << 16) | (b[i + 2]! << 8) | b[i + 3]!) >>> 0;
}
function be16(b: Uint8Array, i: number): number {
  return (b[i]! << 8) | b[i + 1]!;
}

function pngHeader(b: Uint8Array): Parsed | undefined {
  // Signature, then IHDR first (the PNG spec requires it): length 13, "IHDR", width, height, depth, colour type.
  if (b.length < 33) return undefined;
  for (let i = 0; i < 8; i++) if (b[i] !== PNG_SIGNATURE[i]) return undefined;
  if (be32(b, 8) !== 13 || b[12] !== 0x49 || b[13] !== 0x48 || b[14] !== 0x44 || b[15] !== 0x52) return undefined;
  const width = be32(b, 16);
  const height = be32(b, 20);
  const depth = b[24]!;
  const colour = b[25]!;
  if (!PNG_COLOR_DEPTHS[colour]?.includes(depth)) return undefined;
  if (colour === 0 && depth === 16) return undefined; // 16-bit grey takes its own decode path; sharp says which
  if (width === 0 || height === 0 || width > 0x7fffffff || height > 0x7fffffff) return undefined;
  // IHDR's last byte: 0 none, 1 Adam7.
  return { format: 'png', width, height, depth, colour, interlaced: b[28] !== 0 };
}

// Start-of-frame markers: baseline, extended, progressive, lossless, and their differential/arithmetic forms.
const SOF = new Set([0xc0, 0xc1, 0xc2, 0xc3, 0xc5, 0xc6, 0xc7, 0xc9, 0xca, 0xcb, 0xcd, 0xce, 0xcf]);

function jpegHeader(b: Uint8Array): Parsed | undefined {
  if (b.length < 4 || b[0] !== 0xff || b[1] !== 0xd8) return undefined;
  let i = 2;
  // The segments before the frame header are a few kB (APPn, DQT, DHT): walk their lengths to the SOF.
  while (i + 4 <= b.length) {
    if (b[i] !== 0xff) return undefined;
    let m = b[i + 1]!;
    while (m === 0xff && i + 2 < b.length) m = b[++i + 1]!; // fill bytes
    i += 2;
    if (m === 0x01 || (m >= 0xd0 && m <= 0xd7)) continue; // standalone markers carry no length
    if (m === 0xd9 || m === 0xda) return undefined; // end of image or start of scan before any frame header
    if (i + 2 > b.length) return undefined;
    const len = be16(b, i);
    if (len < 2) return undefined;
    if (SOF.has(m)) {
      if (len < 8 || i + 8 > b.length) return undefined;
      const precision = b[i + 2]!;
      const height = be16(b, i + 3);
      const width = be16(b, i + 5);
      if (precision !== 8 || width === 0 || height === 0) return undefined;
      // The component count follows the size (ITU T.81 B.2.2).
      return { format: 'jpeg', width, height, components: b[i + 7]! };
    }
    i += len;
  }
  return undefined;
}

/** The format and size of a plain PNG or JPEG from its header bytes, or undefined (ask sharp). */
export function readImageHeader(bytes: Uint8Array): ImageHeader | undefined {
  const h = pngHeader(bytes) ?? jpegHeader(bytes);
  return h && { format: h.format, width: h.width, height: h.height };
}

/**
 * The header as readImageHeader reads it, only when the file is a form the sidecar's decoder takes
 * (SERVING.md, "Where images are decoded"): a PNG that is not interlaced and not 1/2/4-bit grey, or an 8-bit
 * JPEG of 1 (grey) or 3 (YCbCr/RGB) components (not CMYK/YCCK). Else undefined: the server decodes it.
 */
export function sidecarForm(bytes: Uint8Array): ImageHeader | undefined {
  const h = pngHeader(bytes) ?? jpegHeader(bytes);
  if (!h) return undefined;
  if (h.format === 'png' ? h.interlaced || (h.colour === 0 && h.depth < 8) : h.components !== 1 && h.components !== 3) return undefined;
  return { format: h.format, width: h.width, height: h.height };
}
