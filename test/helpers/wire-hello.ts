// A version-4 hello as a test peer sends it: a detect head of numQueries × numClasses, fp32 on the host's
// cores, unless the test says otherwise.
import { f32Bytes, PROTOCOL_VERSION, type WireHello } from '../../src/protocol/codec.ts';

export function wireHello(over: Partial<WireHello> & Pick<WireHello, 'num_queries' | 'num_classes' | 'labels'>): WireHello {
  return {
    kind: 'hello', id: 0, protocol_version: PROTOCOL_VERSION, sidecar_version: '0.0.0-test', engine: 'test', device: 'test peer',
    input_shape: [3, 560, 560], variant: 'base', task: 'detect',
    outputs: [
      { name: 'logits', dtype: 'f32', shape: [over.num_queries, over.num_classes] },
      { name: 'pred_boxes', dtype: 'f32', shape: [over.num_queries, 4] },
    ],
    precision: 'fp32', precisions: ['fp32'], host_cores: true, ...over,
  };
}

/** A version-4 infer reply's outputs map for a detect head. */
export function detectOutputs(logits: Float32Array, predBoxes: Float32Array): Record<string, Uint8Array> {
  return { logits: f32Bytes(logits), pred_boxes: f32Bytes(predBoxes) };
}
