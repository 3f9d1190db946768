// The image limits, in one place: the decoder enforces them (decode.ts) and the sidecar protocol sizes its
// frame cap from them (src/protocol/codec.ts). No dependencies, so the protocol module does not load sharp.

/** Largest side of an accepted image, in pixels. */
export const MAX_IMAGE_SIDE = 8192;
/** Largest encoded image accepted, in bytes. */
export const MAX_IMAGE_BYTES = 32 * 1024 * 1024;
/** Longest image_url accepted, in characters: real image URLs are far shorter, and a longer one is refused before anything is fetched. */
export const MAX_IMAGE_URL_LENGTH = 8192;
