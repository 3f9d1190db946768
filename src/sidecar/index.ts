// The sidecar backend as the rest of the package sees it: the factory and domain types, no wire shapes.
export { createBackend, SidecarBackend } from './supervisor.ts';
export type { SidecarBackendOptions } from './supervisor.ts';
export { silentLogger, type Logger } from '../log.ts';
export type { BackendState, InferenceBackend, InferInput, InferOptions, InferResult, SidecarInfo } from './backend.ts';
