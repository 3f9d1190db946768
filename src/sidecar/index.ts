// The sidecar backend as the rest of the package sees it: the factory and domain types, no wire shapes.
export { createBackend, SidecarBackend, silentLogger } from './supervisor.ts';
export type { Logger, SidecarBackendOptions } from './supervisor.ts';
export type { BackendState, InferenceBackend, InferInput, InferOptions, InferResult, SidecarInfo } from './backend.ts';
