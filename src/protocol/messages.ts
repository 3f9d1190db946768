// The sidecar protocol's messages as they travel (contract: sidecar/PROTOCOL.md): the wire (snake_case) types,
// the versions this client speaks, and the canonical key order both codecs write. Wire shapes never leave
// src/protocol and src/sidecar.
import type { WireErrorCode } from './error-codes.ts';

/** This client's protocol version: 4 added the hello's task, outputs, precision, precisions, host_cores and the reply's `outputs` map. */
export const PROTOCOL_VERSION = 4;
/** The older version whose hello ends at `variant` and whose infer reply carries `logits` and `pred_boxes` as keys. */
export const PROTOCOL_VERSION_WITHOUT_OUTPUTS = 3;
/** The oldest version this client speaks: a version-3 hello without `variant`. */
export const PROTOCOL_VERSION_WITHOUT_VARIANT = 2;
/** Every version this client speaks, newest first. */
export const PROTOCOL_VERSIONS: readonly number[] = [PROTOCOL_VERSION, PROTOCOL_VERSION_WITHOUT_OUTPUTS, PROTOCOL_VERSION_WITHOUT_VARIANT];

export type WireOp = 'hello' | 'infer' | 'ping' | 'shutdown' | 'shm_attach' | 'decoders';
export const REQUEST_OPS: ReadonlySet<string> = new Set(['infer', 'ping', 'shutdown', 'shm_attach', 'decoders']);

/**
 * One head output a version-4 hello declares: the reply's `outputs` carries product(shape) f32 under `name`;
 * with `rows: "selected"`, K·product(shape[1:]) f32 for the K rows the reply's `rows` names (PROTOCOL.md,
 * "Selected rows").
 */
export interface WireOutputSpec {
  name: string;
  dtype: string;
  shape: number[];
  rows?: 'selected';
}
/**
 * An infer request's `select`: the rows a selected output carries. `class_thresholds` keys are class ids as
 * decimal strings.
 */
export interface WireSelect {
  threshold: number;
  max: number;
  classes?: number[];
  class_thresholds?: Record<string, number>;
}

export interface WireHello {
  kind: 'hello';
  id: 0;
  protocol_version: number;
  sidecar_version: string;
  engine: string;
  device: string;
  input_shape: number[];
  num_queries: number;
  num_classes: number;
  labels: string[];
  /** The loaded checkpoint's variant ("base", "nano", …, "large_deprecated", "seg-nano", …, "seg-2xlarge"); absent in a version-2 hello. */
  variant?: string;
  /** Version 4 on: the model's task ("detect", "segment"). */
  task?: string;
  /** Version 4 on: the head outputs, in the order the infer reply carries them. */
  outputs?: WireOutputSpec[];
  /** Version 4 on: the arithmetic the engine runs. */
  precision?: string;
  /** Version 4 on: the precisions the engine can run, its default first. */
  precisions?: string[];
  /** Version 4 on: whether the engine's forward computes on the host's cores. */
  host_cores?: boolean;
}
/** A decoded image as it travels: RGB u8, HWC, row-major, exactly width·height·3 bytes. */
export interface WireImage {
  width: number;
  height: number;
  rgb: Uint8Array;
}
/** A decoded image left in one of the connection's slot files: `length` = width·height·3 bytes at `offset`. */
export interface WireImageShm {
  name: string;
  offset: number;
  length: number;
  width: number;
  height: number;
}
/**
 * An image file for the sidecar to decode (PROTOCOL.md, "Images the sidecar decodes"): `format` "jpeg" or
 * "png", `width` and `height` the client's reading of its header, `bytes` the whole file.
 */
export interface WireImageEncoded {
  format: string;
  width: number;
  height: number;
  bytes: Uint8Array;
}
/** The shm_attach reply: the connection's slot files (absolute paths) and the bytes each can hold. */
export interface WireShm {
  paths: string[];
  slot_bytes: number;
}
export interface WireRequest {
  kind: 'request';
  id: number;
  op: 'infer' | 'ping' | 'shutdown' | 'shm_attach' | 'decoders';
  /** infer carries exactly one of image, pixel_values, image_shm and image_encoded. */
  image?: WireImage;
  pixel_values?: Uint8Array;
  image_shm?: WireImageShm;
  image_encoded?: WireImageEncoded;
  /** infer, optional: which rows a selected output carries (ignored by a sidecar without one). */
  select?: WireSelect;
}
export interface WireOkReply {
  kind: 'reply';
  id: number;
  ok: true;
  /** A version-4 infer reply: each output's f32 little-endian bytes by name, in the hello's order. */
  outputs?: Record<string, Uint8Array>;
  /** A version-4 infer reply of a task with a selected output: per selected output, the query of each row. */
  rows?: Record<string, number[]>;
  /** A version-2/3 infer reply's two outputs. */
  logits?: Uint8Array;
  pred_boxes?: Uint8Array;
  /** The sidecar's decode time: only in the reply to an image_encoded infer. */
  decode_ms?: number;
  preprocess_ms?: number;
  forward_ms?: number;
  shm?: WireShm;
  /** The decoders reply: the encoded formats this sidecar decodes. */
  decoders?: string[];
}
export interface WireErrorReply {
  kind: 'error';
  id: number;
  ok: false;
  error: { code: WireErrorCode; message: string };
}
export type WireMessage = WireHello | WireRequest | WireOkReply | WireErrorReply;

// Canonical key order after "id" (the same list as the C++ codec's field names). The hello's `outputs` (a
// list of specs) and the infer reply's (a map of binaries) share the key and its place.
export const FIELD_ORDER = [
  'op', 'ok', 'protocol_version', 'sidecar_version', 'engine', 'device', 'input_shape', 'num_queries', 'num_classes', 'labels',
  'variant', 'task', 'outputs', 'rows', 'precision', 'precisions', 'host_cores', 'image', 'pixel_values', 'image_shm', 'image_encoded',
  'select', 'logits', 'pred_boxes', 'decode_ms', 'preprocess_ms', 'forward_ms', 'shm', 'decoders', 'error',
] as const;
export const IMAGE_FIELDS = ['width', 'height', 'rgb'] as const;
export const IMAGE_SHM_FIELDS = ['name', 'offset', 'length', 'width', 'height'] as const;
export const IMAGE_ENCODED_FIELDS = ['format', 'width', 'height', 'bytes'] as const;
export const OUTPUT_SPEC_FIELDS = ['name', 'dtype', 'shape'] as const;
/** A hello output entry's optional key, after OUTPUT_SPEC_FIELDS, and its one value. */
export const OUTPUT_SPEC_ROWS = 'rows';
export const ROWS_SELECTED = 'selected';
/** An infer request's select: the required keys, then the optional ones, in canonical order. */
export const SELECT_FIELDS = ['threshold', 'max'] as const;
export const SELECT_OPTIONAL_FIELDS = ['classes', 'class_thresholds'] as const;
export const INFER_INPUTS = ['image', 'pixel_values', 'image_shm', 'image_encoded'] as const;
/** The infer reply's keys (decode_ms besides, after an image_encoded request): version 4, and versions 2 and 3. */
export const INFER_REPLY_FIELDS = ['outputs', 'preprocess_ms', 'forward_ms'] as const;
export const INFER_REPLY_FIELDS_V3 = ['logits', 'pred_boxes', 'preprocess_ms', 'forward_ms'] as const;
/** The hello's keys by version (after id): 4 ends at host_cores, 3 at variant, 2 has no variant. */
export const HELLO_FIELDS = FIELD_ORDER.slice(0, FIELD_ORDER.indexOf('host_cores') + 1).filter((k) => k !== 'rows');
export const HELLO_FIELDS_V3 = FIELD_ORDER.slice(0, FIELD_ORDER.indexOf('variant') + 1);
export const HELLO_FIELDS_V2 = HELLO_FIELDS_V3.filter((k) => k !== 'variant');
/** The dtypes an output may have: f32 only. */
export const OUTPUT_DTYPES: readonly string[] = ['f32'];
