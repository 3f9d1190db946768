// What /info reports under `device_params` before a sidecar has said more (/info then shows the precision its
// hello names): the engine flags the server was started with (the precision: the flag, else the engine's
// default from --list-engines, null when neither is known), and, for a pool,
// its members and the threads each sidecar was actually given (with --workers N and the default --threads 0
// the physical cores are split among the workers, so the flag alone would not say what each one runs with).
import type { MemberSpec } from '../../src/sidecar/devices.ts';

export interface DeviceParamFlags {
  engine: string;
  threads?: number;
  precision?: string;
  sidecarSocket?: string;
}

export function deviceParamsFor(f: DeviceParamFlags, pool: { members: MemberSpec[]; minReady: number } | undefined): Record<string, unknown> {
  const perSidecar = pool?.members.map((m) => m.threads ?? f.threads ?? 0);
  return {
    engine: f.engine, threads: f.threads ?? 0, precision: f.precision ?? null, sidecar_socket: f.sidecarSocket ?? null,
    devices: pool?.members.map((m) => m.label) ?? null, min_ready_devices: pool?.minReady ?? 1,
    // 0 = the sidecar's own choice (all physical cores); present only when a member was given a count of its own.
    ...(pool?.members.some((m) => m.threads !== undefined) ? { threads_per_sidecar: perSidecar } : {}),
  };
}
