// A backend that never started: a model of several whose weights could not be resolved (or whose engine was
// refused) is served as this, in state `failed` with the reason, so the server reports it by its id (GET /health,
// /info, /ready's 503) and answers its requests 503 E_SIDECAR_FAILED, while the other models serve.
import { RfdetrError } from '../errors.ts';
import type { BackendState, InferenceBackend, InferResult, SidecarInfo } from './backend.ts';
import type { Prepared } from './transport.ts';

export function failedBackend(reason: string): InferenceBackend {
  const fail = (): never => {
    throw new RfdetrError('E_SIDECAR_FAILED', `the model did not start (${reason}): fix it and reload (SIGHUP), or restart the server`);
  };
  let state: BackendState = 'failed';
  return {
    get state() {
      return state;
    },
    info: null as SidecarInfo | null,
    restarts: 0,
    failureReason: reason,
    onStateChange: () => () => {},
    infer: async (): Promise<InferResult> => fail(),
    prepare: async (): Promise<Prepared> => fail(),
    close: async () => {
      state = 'failed';
    },
    destroy: () => {},
  };
}
