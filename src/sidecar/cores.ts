// The host's physical cores as the sidecar counts them (thread-pool.cpp physical_core_count: distinct
// (package, core) pairs among the CPUs this process may run on), and their split among --workers sidecars,
// so that N workers at the default --threads 0 share the cores instead of each taking all of them.
import fs from 'node:fs';
import os from 'node:os';

/** CPUs in a list such as "0-3,8,10-11" (Cpus_allowed_list, sysfs). */
export function parseCpuList(list: string): number[] {
  const out: number[] = [];
  for (const part of list.trim().split(',')) {
    const m = /^(\d+)(?:-(\d+))?$/.exec(part.trim());
    if (!m) continue;
    const a = Number(m[1]);
    const b = m[2] === undefined ? a : Number(m[2]);
    for (let c = a; c <= b; c++) out.push(c);
  }
  return out;
}

function read(file: string): string | undefined {
  try {
    return fs.readFileSync(file, 'utf8').trim();
  } catch {
    return undefined;
  }
}

/** Physical cores among the CPUs this process may run on; the logical count where the topology is unknown. */
export function physicalCoreCount(): number {
  const allowed = /^Cpus_allowed_list:\s*(.+)$/m.exec(read('/proc/self/status') ?? '');
  const cpus = allowed ? parseCpuList(allowed[1]!) : [];
  const cores = new Set<string>();
  for (const c of cpus) {
    const base = `/sys/devices/system/cpu/cpu${c}/topology/`;
    const pkg = read(`${base}physical_package_id`);
    const core = read(`${base}core_id`);
    if (pkg !== undefined && core !== undefined) cores.add(`${pkg}/${core}`);
  }
  if (cores.size > 0) return cores.size;
  return cpus.length > 0 ? cpus.length : Math.max(1, os.availableParallelism());
}

/** `cores` threads over `workers` sidecars: the first cores % workers get one more; none gets fewer than 1. */
export function splitCores(cores: number, workers: number): number[] {
  const each = Math.floor(cores / workers);
  return Array.from({ length: workers }, (_, i) => Math.max(1, each + (i < cores % workers ? 1 : 0)));
}
