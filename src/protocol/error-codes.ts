// The protocol's error codes, kept by hand from the table in sidecar/PROTOCOL.md ("Error codes");
// test/protocol parses that table and fails when this list differs from it.
import type { ErrorCode } from '../errors.ts';

export const WIRE_ERRORS = {
  E_FRAME: { closesConnection: true, domain: 'E_PROTOCOL' },
  E_UNKNOWN_OP: { closesConnection: false, domain: 'E_PROTOCOL' },
  E_FIELD: { closesConnection: false, domain: 'E_PROTOCOL' },
  E_FORWARD: { closesConnection: false, domain: 'E_INFERENCE' },
  E_STOPPING: { closesConnection: false, domain: 'E_SIDECAR_EXITED' },
  E_SHM: { closesConnection: false, domain: 'E_PROTOCOL' },
  E_DECODE: { closesConnection: false, domain: 'E_SIDECAR_DECLINED' },
} as const satisfies Record<string, { closesConnection: boolean; domain: ErrorCode }>;

export type WireErrorCode = keyof typeof WIRE_ERRORS;

export function isWireErrorCode(s: unknown): s is WireErrorCode {
  return typeof s === 'string' && Object.hasOwn(WIRE_ERRORS, s);
}
