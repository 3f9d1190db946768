// Which model `rfdetr serve` names on /health, /info, /v1/models, /tt-liveness and in the OpenAPI document.
// A sidecar says in its hello which variant it loaded (PROTOCOL.md, protocol version 3). An external sidecar
// (--sidecar-socket) loaded weights of its own, so its hello is the only evidence: the name follows it. A
// version-2 sidecar does not say: it is named as Base, as before, and one log line says the variant is
// unknown. The server's own sidecars load the checkpoint it resolved: their hello must name the same variant
// as the checkpoint's tensors (checkpointVariant), else the server stops with an error naming both.
import { modelIdentityOf, type ModelIdentity } from '../../src/http/index.ts';
import { RfdetrError } from '../../src/errors.ts';
import type { InferenceBackend } from '../../src/sidecar/backend.ts';

/** The model of an external sidecar: asked per request, it follows the hello of the connection in use. */
export function externalSidecarModel(
  backend: InferenceBackend, socketPath: string, hubRepo: string | null, log: (line: string) => void,
): () => ModelIdentity {
  let said = false;
  const check = () => {
    const info = backend.info;
    if (said || backend.state !== 'ready' || !info || info.variant !== null) return;
    said = true;
    log(`the sidecar at ${socketPath} (version ${info.sidecarVersion}, protocol ${info.protocolVersion}) does not say which variant it loaded: ` +
      `the model is named ${modelIdentityOf(null, hubRepo).name}, which may be wrong; upgrade the sidecar to one that speaks protocol 3 to have it named`);
  };
  backend.onStateChange(check);
  check();
  return () => {
    const variant = backend.info?.variant ?? null;
    // The repo resolved here is no evidence of what the external sidecar loaded; it names only an unknown variant, as before.
    return variant === null ? modelIdentityOf(null, hubRepo) : modelIdentityOf(variant, null);
  };
}

/**
 * Calls onMismatch once when a sidecar the server started says it loaded another variant than `expected` (the
 * resolved checkpoint's, from its tensors; null: not known here, nothing to check).
 */
export function checkSidecarVariant(
  backend: InferenceBackend, expected: string | null, weightsDir: string, onMismatch: (err: RfdetrError) => void,
): void {
  if (expected === null) return;
  let done = false;
  const check = () => {
    const said = backend.info?.variant ?? null;
    if (done || backend.state !== 'ready' || said === null || said === expected) return;
    done = true;
    onMismatch(new RfdetrError('E_WEIGHTS_INVALID',
      `the sidecar says it loaded RF-DETR variant '${said}', but the checkpoint in ${weightsDir} is '${expected}' by its tensors; ` +
      'the sidecar binary and this server disagree on the checkpoint: rebuild the sidecar (npm run build:sidecar) and check RFDETR_SIDECAR (another sidecar executable) is unset or points at this build',
      { sidecarVariant: said, checkpointVariant: expected }));
  };
  backend.onStateChange(check);
  check();
}
