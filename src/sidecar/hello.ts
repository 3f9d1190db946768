// What a sidecar's hello says, in domain terms, and whether this client can serve it: a protocol version it
// speaks, an input shape [3,S,S], and a task it has a postprocess for (src/detect/tasks.ts) with the outputs
// that postprocess reads. Version-2/3 hellos (older sidecars over --sidecar-socket) map as PROTOCOL.md says.
import { RfdetrError } from '../errors.ts';
import { PROTOCOL_VERSION, PROTOCOL_VERSIONS, type WireHello } from '../protocol/codec.ts';
import { helloTaskError } from '../detect/tasks.ts';
import type { SidecarInfo } from './backend.ts';

type HelloFacts = Pick<SidecarInfo, 'task' | 'outputs' | 'precision' | 'precisions' | 'hostCores'>;

/** A version-2/3 sidecar serves detection with the two outputs its reply carries as keys; it does not say its precision. */
function factsOfV3(h: WireHello): HelloFacts {
  return {
    task: 'detect',
    outputs: [
      { name: 'logits', dtype: 'f32', shape: [h.num_queries, h.num_classes] },
      { name: 'pred_boxes', dtype: 'f32', shape: [h.num_queries, 4] },
    ],
    precision: null,
    precisions: null,
    hostCores: null,
  };
}

function factsOfV4(h: WireHello, outputs: NonNullable<WireHello['outputs']>): HelloFacts {
  return {
    task: h.task ?? '',
    // The codec admits f32 outputs only.
    outputs: outputs.map((o) => (o.rows === 'selected' ? { name: o.name, dtype: 'f32', shape: o.shape, rows: 'selected' } : { name: o.name, dtype: 'f32', shape: o.shape })),
    precision: h.precision ?? null,
    precisions: h.precisions ?? null,
    hostCores: h.host_cores ?? null,
  };
}

export function infoFromHello(h: WireHello): SidecarInfo {
  const [c, hgt, w] = h.input_shape;
  return {
    protocolVersion: h.protocol_version,
    sidecarVersion: h.sidecar_version,
    engine: h.engine,
    device: h.device,
    inputShape: [c ?? 0, hgt ?? 0, w ?? 0],
    numQueries: h.num_queries,
    numClasses: h.num_classes,
    labels: h.labels,
    variant: h.variant ?? null,
    ...(h.outputs ? factsOfV4(h, h.outputs) : factsOfV3(h)),
  };
}

/** The sidecar's info when this client can serve it; else the error that refuses it (the connection then closes). */
export function acceptHello(h: WireHello): SidecarInfo | RfdetrError {
  if (!PROTOCOL_VERSIONS.includes(h.protocol_version)) {
    return new RfdetrError('E_VERSION_MISMATCH',
      `sidecar ${h.sidecar_version} speaks protocol version ${h.protocol_version}, this client speaks versions ${PROTOCOL_VERSIONS.join(', ')}; ` +
      'install matching versions (rebuild the sidecar with npm install)',
      { sidecarProtocol: h.protocol_version, clientProtocol: PROTOCOL_VERSION, sidecarVersion: h.sidecar_version });
  }
  const [c, s, w] = h.input_shape;
  if (c !== 3 || s !== w || !(s! >= 32 && s! <= 4096)) {
    return new RfdetrError('E_PROTOCOL', `sidecar input shape is [${h.input_shape.join(',')}]; this client expects [3,S,S] with 32 ≤ S ≤ 4096`);
  }
  const info = infoFromHello(h);
  const taskWhy = helloTaskError(info);
  // `unservable`: restarting the same sidecar cannot fix it (the supervisor fails at once).
  return taskWhy === undefined ? info : new RfdetrError('E_PROTOCOL', taskWhy, { task: info.task, unservable: true });
}
