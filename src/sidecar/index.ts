// The sidecar backend as the rest of the package sees it: the factories and domain types, no wire shapes.
export { createBackend, SidecarBackend } from './supervisor.ts';
export { silentLogger, type Logger } from './logger.ts';
export type { SidecarBackendOptions } from './supervisor.ts';
export type { BackendState, InferenceBackend, InferInput, InferOptions, InferResult, SidecarInfo } from './backend.ts';
export { createPool, SidecarPool, type PoolOptions } from './pool.ts';
export { planMembers, parseDeviceList, type MemberSpec } from './devices.ts';
export type { DeviceStatus } from './backend.ts';
export { prepareFrame, type DecodedBy, type FrameData, type Prepared, type TransportBudget, type TransportCaps } from './transport.ts';
