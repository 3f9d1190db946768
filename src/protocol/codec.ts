// The sidecar protocol (contract: sidecar/PROTOCOL.md), one module per job: messages.ts (the wire types,
// versions and canonical key order), framing.ts (length headers and reassembly), encode.ts (canonical
// frames), decode.ts (payload → checked message) and fast-frames.ts (the per-request frames written and read
// byte by byte). This file is the one import the rest of the code uses.
export {
  PROTOCOL_VERSION, PROTOCOL_VERSION_WITHOUT_OUTPUTS, PROTOCOL_VERSION_WITHOUT_VARIANT, PROTOCOL_VERSIONS,
  type WireHello, type WireImage, type WireImageEncoded, type WireImageShm, type WireMessage, type WireOkReply, type WireErrorReply,
  type WireOp, type WireOutputSpec, type WireRequest, type WireSelect, type WireShm,
} from './messages.ts';
export { FrameReader, FRAME_HEADER_BYTES, MAX_FRAME_BYTES, MAX_IMAGE_SIDE } from './framing.ts';
export { encodeFrame, encodeFrameParts, f32Bytes } from './encode.ts';
export { decodePayload, f32FromBytes, type DecodeResult } from './decode.ts';
export { inferReplyAt } from './fast-frames.ts';
