// An infer reply checked against the sidecar's hello and turned into the domain result: the outputs are
// exactly the hello's, by name and in its order, each of its declared size (PROTOCOL.md, "infer"); a selected
// output holds the rows its `rows` entry names, each a query below its bound, once ("Selected rows"). A
// version-2/3 reply carries `logits` and `pred_boxes` as keys; they are the outputs of those names.
import { f32FromBytes, PROTOCOL_VERSION_WITHOUT_OUTPUTS, type WireMessage } from '../protocol/codec.ts';
import type { InferResult, OutputSpec, SidecarInfo } from './backend.ts';

export interface ReplyTiming {
  /** performance.now() when the request frame had been handed to the kernel (undefined if not yet told). */
  writtenAt: number | undefined;
  /** performance.now() when the reply frame had been read. */
  readAt: number;
  /** The round trip in ms. */
  rtt: number;
  /** The request was an image file for the sidecar to decode: the reply must carry decode_ms. */
  encoded: boolean;
}

const product = (shape: readonly number[]) => shape.reduce((n, d) => n * d, 1);

/** The queries of selected output `o`'s rows, or what is wrong with them and its bytes. */
function selectedRows(o: OutputSpec, queries: readonly number[] | undefined, bytes: number): Uint32Array | string {
  const bound = o.shape[0]!;
  if (!queries) return `infer reply has no rows for the selected output ${o.name}; the hello declared it rows: selected`;
  if (queries.length > bound) return `infer reply's rows for ${o.name} name ${queries.length} queries; the hello declared at most ${bound}`;
  const rows = Uint32Array.from(queries);
  const seen = new Uint8Array(bound);
  for (const q of rows) {
    if (q >= bound) return `infer reply's rows for ${o.name} name query ${q}; the hello declared ${bound} queries (0..${bound - 1})`;
    if (seen[q]) return `infer reply's rows for ${o.name} name query ${q} twice`;
    seen[q] = 1;
  }
  const want = rows.length * product(o.shape.slice(1)) * 4;
  if (bytes !== want) {
    return `infer reply's output ${o.name} is ${bytes} bytes for ${rows.length} rows; the hello declared rows of f32 [${o.shape.slice(1).join(',')}] = ${want} bytes`;
  }
  return rows;
}

/** The domain result, or what is wrong with the reply (the caller then closes the connection with E_PROTOCOL). */
export function inferResultOf(reply: WireMessage, info: SidecarInfo, t: ReplyTiming): InferResult | string {
  if (reply.kind !== 'reply' || reply.forward_ms === undefined || reply.preprocess_ms === undefined || (t.encoded && reply.decode_ms === undefined)) {
    return `infer reply lacks preprocess_ms or forward_ms${t.encoded ? ', or decode_ms (the request was image_encoded)' : ''}`;
  }
  const v3 = info.protocolVersion <= PROTOCOL_VERSION_WITHOUT_OUTPUTS;
  const wire = v3 ? (reply.logits && reply.pred_boxes ? { logits: reply.logits, pred_boxes: reply.pred_boxes } : undefined) : reply.outputs;
  const declared = info.outputs.map((o) => `${o.name} [${o.shape.join(',')}]`).join(', ');
  if (!wire) return `infer reply lacks its outputs (${v3 ? 'logits and pred_boxes' : 'the outputs map'}); the hello declared ${declared}`;
  const names = Object.keys(wire);
  if (names.length !== info.outputs.length || info.outputs.some((o, i) => o.name !== names[i])) {
    return `infer reply carries the outputs ${names.join(', ') || 'none'}; the hello declared ${declared}, in that order`;
  }
  const outputs: Record<string, Float32Array> = {};
  const selected = info.outputs.filter((o) => o.rows === 'selected');
  const wireRows = v3 ? undefined : reply.rows;
  const stray = Object.keys(wireRows ?? {}).find((name) => !selected.some((o) => o.name === name));
  if (stray !== undefined) return `infer reply has rows for ${stray}, which the hello did not declare a selected output`;
  const rows: Record<string, Uint32Array> = {};
  for (const o of info.outputs) {
    const bytes = wire[o.name]!;
    if (o.rows === 'selected') {
      const r = selectedRows(o, wireRows?.[o.name], bytes.length);
      if (typeof r === 'string') return r;
      rows[o.name] = r;
    } else if (bytes.length !== product(o.shape) * 4) {
      return `infer reply's output ${o.name} is ${bytes.length} bytes; the hello declared f32 [${o.shape.join(',')}] = ${product(o.shape) * 4} bytes`;
    }
    outputs[o.name] = f32FromBytes(bytes);
  }
  const decodeMs = reply.decode_ms;
  return {
    outputs,
    ...(selected.length ? { rows } : {}),
    ...(decodeMs === undefined ? {} : { decodeMs }),
    preprocessMs: reply.preprocess_ms,
    forwardMs: reply.forward_ms,
    transferMs: Math.max(0, t.rtt - reply.forward_ms - reply.preprocess_ms - (decodeMs ?? 0)),
    frameWrittenAt: Math.min(t.writtenAt ?? t.readAt, t.readAt),
    replyReadAt: t.readAt,
  };
}
