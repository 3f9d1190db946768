// Decoding a payload (the bytes after the length header) into a message, checking it against
// sidecar/PROTOCOL.md: invalid MessagePack, trailing bytes and a map without a valid id are E_FRAME; unknown
// ops E_UNKNOWN_OP; missing, unknown and mistyped fields E_FIELD. The codec checks types; sizes against the
// engine are the receiver's (the client checks an infer reply's outputs against the hello).
import { isWireErrorCode, type WireErrorCode } from './error-codes.ts';
import { inferReplyAt } from './fast-frames.ts';
import { packr } from './encode.ts';
import { MAX_FRAME_BYTES } from './framing.ts';
import {
  FIELD_ORDER, HELLO_FIELDS, HELLO_FIELDS_V2, HELLO_FIELDS_V3, IMAGE_ENCODED_FIELDS, IMAGE_FIELDS, IMAGE_SHM_FIELDS, INFER_INPUTS,
  INFER_REPLY_FIELDS, INFER_REPLY_FIELDS_V3, OUTPUT_DTYPES, OUTPUT_SPEC_FIELDS, OUTPUT_SPEC_ROWS, PROTOCOL_VERSION_WITHOUT_OUTPUTS, PROTOCOL_VERSION_WITHOUT_VARIANT,
  REQUEST_OPS, ROWS_SELECTED, SELECT_FIELDS, SELECT_OPTIONAL_FIELDS, type WireHello, type WireImage, type WireImageEncoded, type WireImageShm,
  type WireMessage, type WireOkReply, type WireOp, type WireRequest, type WireSelect, type WireShm,
} from './messages.ts';

export type DecodeResult =
  | { ok: true; message: WireMessage }
  | { ok: false; code: WireErrorCode; message: string; id: number };

const MAX_ID = 0xffffffff;
const OPS_TEXT = [...REQUEST_OPS].join(', ');
const KNOWN: ReadonlySet<string> = new Set(['id', ...FIELD_ORDER]);

/** Copies a `bin` field into a fresh, aligned Float32Array (a view into a frame may be misaligned). */
export function f32FromBytes(b: Uint8Array): Float32Array {
  const out = new Float32Array(b.byteLength / 4);
  new Uint8Array(out.buffer).set(b);
  return out;
}

const isMap = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v) && !(v instanceof Uint8Array);

/**
 * What is wrong with a version-4 hello's `outputs`: an array of {name, dtype: "f32", shape: [uint…], rows?:
 * "selected"}, names distinct, a selected output with an axis 0.
 */
function outputSpecsError(v: unknown): string | undefined {
  if (!Array.isArray(v)) return `field 'outputs' must be an array of {${OUTPUT_SPEC_FIELDS.join(', ')}}, got ${typeName(v)}`;
  const seen = new Set<string>();
  for (const [i, o] of v.entries()) {
    const key = `outputs[${i}]`;
    const bad = keyedMapError(key, o, OUTPUT_SPEC_FIELDS, [OUTPUT_SPEC_ROWS]);
    if (bad !== undefined) return bad;
    const r = o as Record<string, unknown>;
    if (typeof r.name !== 'string' || r.name === '') return `field '${key}.name' must be a non-empty string, got ${typeName(r.name)}`;
    if (seen.has(r.name)) return `field 'outputs' names '${r.name}' twice`;
    seen.add(r.name);
    if (typeof r.dtype !== 'string' || !OUTPUT_DTYPES.includes(r.dtype)) {
      return `field '${key}.dtype' must be one of ${OUTPUT_DTYPES.join(', ')}, got ${typeof r.dtype === 'string' ? `'${r.dtype}'` : typeName(r.dtype)}`;
    }
    if (!Array.isArray(r.shape) || !r.shape.every(isUint)) return `field '${key}.shape' must be an array of unsigned integers`;
    if (Object.hasOwn(r, OUTPUT_SPEC_ROWS)) {
      if (r.rows !== ROWS_SELECTED) return `field '${key}.rows' is ${typeof r.rows === 'string' ? `'${r.rows}'` : typeName(r.rows)}; expected '${ROWS_SELECTED}' (or no rows key)`;
      if (r.shape.length === 0) return `field '${key}' selects rows but its shape has no axis 0 to select along`;
    }
  }
  return undefined;
}

/** What is wrong with an infer reply's `rows`: a map of output name → array of query indices (uint). */
function rowsError(v: unknown): string | undefined {
  if (!isMap(v)) return `field 'rows' must be a map of output name to an array of unsigned integers (query indices), got ${typeName(v)}`;
  for (const [name, q] of Object.entries(v)) {
    if (!Array.isArray(q) || !q.every(isUint)) {
      return `field 'rows.${name}' must be an array of unsigned integers (query indices), got ${Array.isArray(q) ? `an array holding ${typeName(q.find((x) => !isUint(x)))}` : typeName(q)}`;
    }
  }
  return undefined;
}

/** What is wrong with an infer request's `select` {threshold, max, classes?, class_thresholds?} (types only). */
function selectError(v: unknown): string | undefined {
  const bad = keyedMapError('select', v, SELECT_FIELDS, SELECT_OPTIONAL_FIELDS);
  if (bad !== undefined) return bad;
  const r = v as Record<string, unknown>;
  if (typeof r.threshold !== 'number') return `field 'select.threshold' must be a number, got ${typeName(r.threshold)}`;
  if (!isUint(r.max)) return `field 'select.max' must be an unsigned integer, got ${typeName(r.max)}`;
  if (Object.hasOwn(r, 'classes') && !(Array.isArray(r.classes) && r.classes.every(isUint))) {
    return "field 'select.classes' must be an array of unsigned integers (class ids)";
  }
  if (Object.hasOwn(r, 'class_thresholds')) {
    if (!isMap(r.class_thresholds)) return `field 'select.class_thresholds' must be a map of class id (a decimal string) to threshold, got ${typeName(r.class_thresholds)}`;
    for (const [id, t] of Object.entries(r.class_thresholds)) {
      if (typeof t !== 'number') return `field 'select.class_thresholds.${id}' must be a number, got ${typeName(t)}`;
    }
  }
  return undefined;
}

/** What is wrong with an infer reply's `outputs`: a map of output name → bin of whole f32 values. */
function outputBinsError(v: unknown): string | undefined {
  if (!isMap(v)) return `field 'outputs' must be a map of output name to binary (f32 little-endian), got ${typeName(v)}`;
  for (const [name, b] of Object.entries(v)) {
    if (!(b instanceof Uint8Array)) return `field 'outputs.${name}' must be binary (f32 little-endian), got ${typeName(b)}`;
    if (b.length % 4 !== 0) return `field 'outputs.${name}' must hold whole f32 values, got ${b.length} bytes`;
  }
  return undefined;
}

/**
 * What is wrong with `v` as the map field `key` whose keys are exactly `fields` and any of `optional` (the
 * infer inputs image, image_shm and image_encoded, a select, and each of a hello's outputs): not a map, an
 * unknown key, or a missing one; undefined when its keys are right (the values' types are the caller's to check).
 */
function keyedMapError(key: string, v: unknown, fields: readonly string[], optional: readonly string[] = []): string | undefined {
  const list = [...fields, ...optional].join(', ');
  if (!isMap(v)) return `field '${key}' must be a map {${list}}, got ${typeName(v)}`;
  const extra = Object.keys(v).find((k) => !fields.includes(k) && !optional.includes(k));
  if (extra !== undefined) return `field '${key}' has an unknown key '${extra}'; expected ${list}`;
  const missing = fields.find((k) => !Object.hasOwn(v, k));
  return missing === undefined ? undefined : `field '${key}' lacks '${missing}'; expected ${list}`;
}

function typeName(v: unknown): string {
  if (v === null) return 'nil';
  if (v instanceof Uint8Array) return 'binary';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number') return Number.isInteger(v) ? (v < 0 ? 'negative integer' : 'unsigned integer') : 'float';
  if (typeof v === 'object') return 'map';
  return typeof v;
}

const isUint = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v) && v >= 0;

/** Decodes one payload (the bytes after the length header). Binary fields are views into `payload`. */
export function decodePayload(payload: Uint8Array): DecodeResult {
  const fast = inferReplyAt(payload);
  if (fast) return { ok: true, message: fast };
  const frameErr = (message: string): DecodeResult => ({ ok: false, code: 'E_FRAME', message, id: 0 });
  if (payload.length === 0 || payload.length > MAX_FRAME_BYTES) {
    return frameErr(`payload is ${payload.length} bytes; expected 1 to ${MAX_FRAME_BYTES}`);
  }
  let root: unknown;
  try {
    // unpack() throws on trailing bytes ("Data read, but end of buffer not reached"); E_FRAME either way.
    root = packr.unpack(payload);
  } catch (e) {
    return frameErr(`payload is not valid MessagePack (or has trailing bytes): ${(e as Error).message}`);
  }
  if (root === null || typeof root !== 'object' || Array.isArray(root) || root instanceof Uint8Array || root instanceof Map) {
    return frameErr(`message must be a map, got ${typeName(root)}`);
  }
  const m = root as Record<string, unknown>;
  const id = m.id;
  if (id === undefined) return frameErr("message has no 'id'; expected an unsigned integer");
  if (!isUint(id) || id > MAX_ID) return frameErr(`'id' must be an unsigned integer up to ${MAX_ID}`);
  const fieldErr = (message: string): DecodeResult => ({ ok: false, code: 'E_FIELD', message, id });
  const opErr = (message: string): DecodeResult => ({ ok: false, code: 'E_UNKNOWN_OP', message, id });

  let op: WireOp | undefined;
  if (Object.hasOwn(m, 'op')) {
    if (typeof m.op !== 'string') return opErr(`'op' must be a string, got ${typeName(m.op)}`);
    if (m.op !== 'hello' && !REQUEST_OPS.has(m.op)) return opErr(`unknown op '${m.op}'; expected one of ${OPS_TEXT}`);
    op = m.op as WireOp;
  }
  for (const key of Object.keys(m)) {
    if (!KNOWN.has(key)) return fieldErr(`unknown field '${key}'`);
    const v = m[key];
    const want = (what: string) => fieldErr(`field '${key}' must be ${what}, got ${typeName(v)}`);
    switch (key) {
      case 'ok':
        if (typeof v !== 'boolean') return want('a boolean');
        break;
      case 'protocol_version': case 'num_queries': case 'num_classes':
        if (!isUint(v)) return want('an unsigned integer');
        break;
      case 'sidecar_version': case 'engine': case 'device': case 'variant': case 'task': case 'precision':
        if (typeof v !== 'string') return want('a string');
        break;
      case 'host_cores':
        if (typeof v !== 'boolean') return want('a boolean');
        break;
      case 'precisions':
        if (!Array.isArray(v) || !v.every((s) => typeof s === 'string')) return want('an array of strings');
        break;
      case 'outputs': {
        const bad = op === 'hello' ? outputSpecsError(v) : outputBinsError(v);
        if (bad !== undefined) return fieldErr(bad);
        break;
      }
      case 'rows': {
        const bad = rowsError(v);
        if (bad !== undefined) return fieldErr(bad);
        break;
      }
      case 'select': {
        const bad = selectError(v);
        if (bad !== undefined) return fieldErr(bad);
        break;
      }
      case 'input_shape':
        if (!Array.isArray(v) || v.length !== 3 || !v.every(isUint)) return want('an array of 3 unsigned integers');
        break;
      case 'labels':
        if (!Array.isArray(v) || !v.every((s) => typeof s === 'string')) return want('an array of strings');
        break;
      case 'pixel_values': case 'logits': case 'pred_boxes':
        if (!(v instanceof Uint8Array)) return want('binary (f32 little-endian)');
        if (v.length % 4 !== 0) return fieldErr(`field '${key}' must hold whole f32 values, got ${v.length} bytes`);
        break;
      case 'forward_ms': case 'preprocess_ms': case 'decode_ms':
        if (typeof v !== 'number') return want('a number');
        if (!(v >= 0)) return fieldErr(`field '${key}' must be a non-negative number`);
        break;
      case 'image': {
        const bad = keyedMapError(key, v, IMAGE_FIELDS);
        if (bad !== undefined) return fieldErr(bad);
        const im = v as Record<string, unknown>;
        if (!isUint(im.width)) return fieldErr(`field 'image.width' must be an unsigned integer, got ${typeName(im.width)}`);
        if (!isUint(im.height)) return fieldErr(`field 'image.height' must be an unsigned integer, got ${typeName(im.height)}`);
        if (!(im.rgb instanceof Uint8Array)) return fieldErr(`field 'image.rgb' must be binary (RGB u8 HWC), got ${typeName(im.rgb)}`);
        break;
      }
      case 'image_shm': {
        const bad = keyedMapError(key, v, IMAGE_SHM_FIELDS);
        if (bad !== undefined) return fieldErr(bad);
        const r = v as Record<string, unknown>;
        if (typeof r.name !== 'string') return fieldErr(`field 'image_shm.name' must be a string (a slot file's name), got ${typeName(r.name)}`);
        for (const k of IMAGE_SHM_FIELDS.slice(1)) {
          if (!isUint(r[k])) return fieldErr(`field 'image_shm.${k}' must be an unsigned integer, got ${typeName(r[k])}`);
        }
        break;
      }
      case 'image_encoded': {
        const bad = keyedMapError(key, v, IMAGE_ENCODED_FIELDS);
        if (bad !== undefined) return fieldErr(bad);
        const r = v as Record<string, unknown>;
        if (typeof r.format !== 'string') return fieldErr(`field 'image_encoded.format' must be a string ("jpeg" or "png"), got ${typeName(r.format)}`);
        if (!isUint(r.width)) return fieldErr(`field 'image_encoded.width' must be an unsigned integer, got ${typeName(r.width)}`);
        if (!isUint(r.height)) return fieldErr(`field 'image_encoded.height' must be an unsigned integer, got ${typeName(r.height)}`);
        if (!(r.bytes instanceof Uint8Array)) return fieldErr(`field 'image_encoded.bytes' must be binary (the image file), got ${typeName(r.bytes)}`);
        break;
      }
      case 'decoders':
        if (!Array.isArray(v) || !v.every((s) => typeof s === 'string')) return want('an array of strings');
        break;
      case 'shm': {
        if (v === null || typeof v !== 'object' || Array.isArray(v) || v instanceof Uint8Array) return want('a map {paths, slot_bytes}');
        const r = v as Record<string, unknown>;
        if (Object.keys(r).length !== 2 || !Object.hasOwn(r, 'paths') || !Object.hasOwn(r, 'slot_bytes')) {
          return fieldErr("field 'shm' must carry exactly paths and slot_bytes");
        }
        if (!Array.isArray(r.paths) || !r.paths.every((p) => typeof p === 'string')) return fieldErr("field 'shm.paths' must be an array of strings");
        if (!isUint(r.slot_bytes)) return fieldErr(`field 'shm.slot_bytes' must be an unsigned integer, got ${typeName(r.slot_bytes)}`);
        break;
      }
      case 'error': {
        if (v === null || typeof v !== 'object' || Array.isArray(v) || v instanceof Uint8Array) return want('a map {code, message}');
        const e = v as Record<string, unknown>;
        const keys = Object.keys(e);
        if (keys.some((k) => k !== 'code' && k !== 'message')) return fieldErr(`field 'error' has an unknown key`);
        if (typeof e.code !== 'string') return fieldErr(`field 'error.code' must be a string, got ${typeName(e.code)}`);
        if (!isWireErrorCode(e.code)) return fieldErr(`field 'error.code' is '${e.code}', which is not in the error table`);
        if (typeof e.message !== 'string') return fieldErr(`field 'error.message' must be a string, got ${typeName(e.message)}`);
        break;
      }
    }
  }
  const present = (k: string) => Object.hasOwn(m, k);
  const payloadKeys = Object.keys(m).filter((k) => k !== 'id' && k !== 'op' && k !== 'ok');

  if (present('ok')) {
    if (op === 'hello') {
      // The version says which fields a hello has (PROTOCOL.md, "Versions"); any version but 2 and 3 is
      // held to this client's, and the client then names the version it does not speak.
      const version = m.protocol_version;
      const want = version === PROTOCOL_VERSION_WITHOUT_VARIANT ? HELLO_FIELDS_V2 : version === PROTOCOL_VERSION_WITHOUT_OUTPUTS ? HELLO_FIELDS_V3 : HELLO_FIELDS;
      if (!want.every(present) || Object.keys(m).length !== want.length + 1) {
        const missing = want.find((k) => !present(k));
        const extra = Object.keys(m).find((k) => k !== 'id' && !(want as readonly string[]).includes(k));
        return fieldErr(`a version-${String(version)} hello must carry exactly ${want.slice(2).join(', ')} (PROTOCOL.md); ${missing !== undefined ? `it lacks '${missing}'` : `'${extra}' is not one of them`}`);
      }
      const labels = m.labels as string[];
      if (labels.length !== m.num_classes) {
        return fieldErr(`hello has ${labels.length} labels for ${String(m.num_classes)} classes`);
      }
      return { ok: true, message: { kind: 'hello', ...(m as object), id: 0 } as WireHello };
    }
    if (op !== undefined) return fieldErr("a reply carries no 'op' (only the hello does)");
    if (m.ok === false) {
      if (payloadKeys.length !== 1 || payloadKeys[0] !== 'error') return fieldErr("an error reply carries exactly 'error'");
      const e = m.error as { code: WireErrorCode; message: string };
      return { ok: true, message: { kind: 'error', id, ok: false, error: { code: e.code, message: e.message } } };
    }
    const only = (k: string) => payloadKeys.length === 1 && payloadKeys[0] === k;
    const isInferOf = (fields: readonly string[], rows: boolean) =>
      payloadKeys.length === fields.length + (present('decode_ms') ? 1 : 0) + (rows && present('rows') ? 1 : 0) && fields.every(present);
    const isInfer = isInferOf(INFER_REPLY_FIELDS, true);
    if (payloadKeys.length !== 0 && !only('shm') && !only('decoders') && !isInfer && !isInferOf(INFER_REPLY_FIELDS_V3, false)) {
      return fieldErr(`an ok reply carries nothing, exactly ${INFER_REPLY_FIELDS.join(', ')} (version 4, and rows for a selected output; ${INFER_REPLY_FIELDS_V3.join(', ')} from versions 2 and 3; and decode_ms after image_encoded), exactly shm, or exactly decoders`);
    }
    const reply: WireOkReply = { kind: 'reply', id, ok: true };
    if (only('shm')) {
      const r = m.shm as WireShm;
      reply.shm = { paths: r.paths, slot_bytes: r.slot_bytes };
    } else if (only('decoders')) {
      reply.decoders = m.decoders as string[];
    } else if (isInfer) {
      reply.outputs = m.outputs as Record<string, Uint8Array>;
      if (present('rows')) reply.rows = m.rows as Record<string, number[]>;
      if (present('decode_ms')) reply.decode_ms = m.decode_ms as number;
      reply.preprocess_ms = m.preprocess_ms as number;
      reply.forward_ms = m.forward_ms as number;
    } else if (payloadKeys.length) {
      reply.logits = m.logits as Uint8Array;
      reply.pred_boxes = m.pred_boxes as Uint8Array;
      if (present('decode_ms')) reply.decode_ms = m.decode_ms as number;
      reply.preprocess_ms = m.preprocess_ms as number;
      reply.forward_ms = m.forward_ms as number;
    }
    return { ok: true, message: reply };
  }

  if (op === undefined) return opErr(`request has no 'op'; expected one of ${OPS_TEXT}`);
  if (op === 'hello') return opErr("'hello' is sent by the sidecar, not requested");
  if (id === 0) return frameErr('request id 0 is reserved for the hello; use 1 to 4294967295');
  const allowed: readonly string[] = op === 'infer' ? [...INFER_INPUTS, 'select'] : [];
  for (const key of FIELD_ORDER) {
    if (present(key) && key !== 'op' && !allowed.includes(key)) {
      return fieldErr(`field '${key}' is not part of a '${op}' request`);
    }
  }
  const given = INFER_INPUTS.filter(present);
  if (op === 'infer' && given.length !== 1) {
    return fieldErr(given.length
      ? `infer request carries ${given.map((k) => `'${k}'`).join(' and ')}; send exactly one`
      : "infer request has none of 'image' (RGB u8 {width, height, rgb}), 'pixel_values' (f32 [3,S,S]), 'image_shm' (a slot reference) and 'image_encoded' (a JPEG or PNG file {format, width, height, bytes}); send exactly one");
  }
  const req: WireRequest = { kind: 'request', id, op };
  if (op === 'infer') {
    if (present('image')) {
      const im = m.image as WireImage;
      req.image = { width: im.width, height: im.height, rgb: im.rgb };
    } else if (present('image_shm')) {
      const r = m.image_shm as WireImageShm;
      req.image_shm = { name: r.name, offset: r.offset, length: r.length, width: r.width, height: r.height };
    } else if (present('image_encoded')) {
      const r = m.image_encoded as WireImageEncoded;
      req.image_encoded = { format: r.format, width: r.width, height: r.height, bytes: r.bytes };
    } else {
      req.pixel_values = m.pixel_values as Uint8Array;
    }
    if (present('select')) {
      const r = m.select as WireSelect;
      req.select = {
        threshold: r.threshold,
        max: r.max,
        ...(r.classes === undefined ? {} : { classes: r.classes }),
        ...(r.class_thresholds === undefined ? {} : { class_thresholds: r.class_thresholds }),
      };
    }
  }
  return { ok: true, message: req };
}

