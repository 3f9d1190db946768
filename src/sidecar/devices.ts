// Which sidecars a server runs: `--devices LIST` (one per accelerator card, each seeing only its card) or
// `--workers N` (N host-engine sidecars), turned into one label and environment per pool member. The card
// scheme is tt-media-server's: each worker gets TT_VISIBLE_DEVICES / TT_METAL_VISIBLE_DEVICES naming its card
// (tt-metal then numbers it 0) and its own TT_METAL_CACHE, so concurrent first boots never write one cache.
import { readdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { RfdetrError } from '../errors.ts';
import { physicalCoreCount, splitCores } from './cores.ts';

/** One sidecar of the pool: its label (metrics, logs, /health) and the environment it adds. */
export interface MemberSpec {
  label: string;
  env: Record<string, string>;
  /** The member's --threads, when it differs from the command's (--workers sharing the cores). */
  threads?: number;
}

export const DEFAULT_DEVICE_DIR = '/dev/tenstorrent';

/** Where Tenstorrent cards appear (one node per card, named by its index); RFDETR_TT_DEVICE_DIR overrides it. */
export function deviceDir(env: NodeJS.ProcessEnv): string {
  return env.RFDETR_TT_DEVICE_DIR || DEFAULT_DEVICE_DIR;
}

/** The card indices present in `dir`, ascending ([] when the directory is absent). */
export function listCards(dir: string): number[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  return names.filter((n) => /^\d+$/.test(n)).map(Number).sort((a, b) => a - b);
}

/** `--devices` value: `all`, or card indices separated by commas (each once). */
export function parseDeviceList(v: string): number[] | 'all' {
  const s = v.trim();
  if (s === 'all') return 'all';
  const items = s.split(',').map((x) => x.trim());
  if (!items.every((x) => /^\d{1,4}$/.test(x))) {
    throw new RfdetrError('E_USAGE', `--devices: expected card indices separated by commas (e.g. 0,1,2,3) or "all" but received ${JSON.stringify(v)}`);
  }
  const ids = items.map(Number);
  const dup = ids.find((d, i) => ids.indexOf(d) !== i);
  if (dup !== undefined) throw new RfdetrError('E_USAGE', `--devices: card ${dup} is listed twice in ${JSON.stringify(v)}; list each card once`);
  return ids;
}

export interface PlanRequest {
  engine: string;
  /**
   * Whether the engine's forward computes on the host's cores (the sidecar's --list-engines): such an engine
   * scales with --workers and is never bound to a card; one that does not runs one sidecar per card
   * (--devices). Null when the sidecar could not say: neither flag is refused here.
   */
  hostCores: boolean | null;
  devices?: number[] | 'all' | undefined;
  workers?: number | undefined;
  /** --threads (0 or absent: physical cores; with --workers, split among them unless RFDETR_THREADS says otherwise). */
  threads?: number | undefined;
  env: NodeJS.ProcessEnv;
  /** The physical cores to split (physicalCoreCount() unless a test says). */
  cores?: () => number;
}

/** The environment of the sidecar for card `id`. */
export function cardEnvironment(id: number, env: NodeJS.ProcessEnv): Record<string, string> {
  const cacheBase = env.TT_METAL_CACHE || path.join(env.HOME || os.homedir(), '.cache', 'tt-metal-cache');
  return {
    TT_VISIBLE_DEVICES: String(id),
    TT_METAL_VISIBLE_DEVICES: String(id),
    // The one visible card is device 0 inside the sidecar.
    TT_DEVICE_ID: '0',
    TT_METAL_CACHE: path.join(cacheBase, `device-${id}`),
  };
}

/** The pool's members for the flags; a flag the engine cannot use is a usage error that says which fits. */
export function planMembers(r: PlanRequest): MemberSpec[] {
  if (r.devices !== undefined && r.workers !== undefined) {
    throw new RfdetrError('E_USAGE', '--devices and --workers cannot be combined: --devices runs one sidecar per card, --workers N sidecars on the host; pick one');
  }
  if (r.devices !== undefined) {
    if (r.hostCores === true) {
      throw new RfdetrError('E_USAGE', `--devices: the ${r.engine} engine runs on the host's cores, not on a card; use --workers N for several ${r.engine} sidecars`);
    }
    let ids = r.devices;
    if (ids === 'all') {
      const dir = deviceDir(r.env);
      ids = listCards(dir);
      if (ids.length === 0) {
        throw new RfdetrError('E_USAGE', `--devices all: no cards in ${dir} (expected one entry per card, 0, 1, …): install the tt-kmd driver, check the cards with tt-smi, or list the cards with --devices 0,1,…`);
      }
    }
    return ids.map((id) => ({ label: String(id), env: cardEnvironment(id, r.env) }));
  }
  if (r.workers !== undefined) {
    if (r.hostCores === false) {
      throw new RfdetrError('E_USAGE', `--workers: the ${r.engine} engine runs on a card; use --devices LIST (e.g. 0,1 or all) for one sidecar per card`);
    }
    const threads = r.threads ?? Number(r.env.RFDETR_THREADS || 0);
    if (threads > 0) return Array.from({ length: r.workers }, (_, i) => ({ label: `worker-${i}`, env: {}, threads }));
    // --threads 0 means "the machine's cores": N workers share them rather than each taking all (N-fold oversubscribed).
    const split = splitCores((r.cores ?? physicalCoreCount)(), r.workers);
    return split.map((n, i) => ({ label: `worker-${i}`, env: {}, threads: n }));
  }
  // One sidecar with the inherited environment (TT_DEVICE_ID / TT_METAL_VISIBLE_DEVICES as the operator set them).
  return [{ label: r.hostCores === false ? (r.env.TT_DEVICE_ID || '0') : 'worker-0', env: {} }];
}
