// What the sidecar executable says about itself (`--version`, and `--list-engines`: every engine it knows,
// whether it is built in and how to build it if not, the precisions it runs with its default, and whether its
// forward computes on the host's cores), for `rfdetr --version`, `rfdetr info` and the --engine/--precision
// check. These facts live in the sidecar's engine registry only; nothing here lists engines or precisions.
// Never throws: a missing or broken executable is described instead.
import fs from 'node:fs';
import { execFile } from 'node:child_process';
import { sidecarBinary } from '../src/config/paths.ts';

export interface SidecarSelfReport {
  path: string;
  present: boolean;
  /** Its `--version` line, "rfdetr-sidecar <version> (protocol <n>)", or why it could not be asked. */
  version: string;
  /** Protocol version parsed from --version, when it says. */
  protocol: number | null;
  /** Engines built in (from --list-engines); null when it does not say. */
  engines: string[] | null;
  /** Every engine it knows with its facts; null when it does not say. */
  engineFacts: EngineFacts[] | null;
}

/** One engine as `rfdetr-sidecar --list-engines` describes it. */
export interface EngineFacts {
  name: string;
  built: boolean;
  /** The precisions it runs, its default first. */
  precisions: string[];
  defaultPrecision: string;
  /** Its forward computes on the host's cores (scaled with --workers), not on a card (--devices). */
  hostCores: boolean;
  /** How to build it, when it is not built in. */
  unbuiltReason?: string;
}

/** `rfdetr-sidecar --list-engines`: every engine it knows, in its order. */
export interface SidecarEngines {
  /** The names of those built in. */
  built: string[];
  /** Each known engine this build lacks, with how to build it. */
  unbuilt: Map<string, string>;
  /** Every engine by name. */
  engines: Map<string, EngineFacts>;
}

type Answer = { ok: true; stdout: string } | { ok: false; why: string };

function ask(bin: string, flag: string, env: NodeJS.ProcessEnv): Promise<Answer> {
  // node:child_process, not execa: importing execa costs ~0.25 s of CPU, a third of `rfdetr --version`.
  return new Promise((resolve) => {
    execFile(bin, [flag], { timeout: 10_000, env: { ...env } }, (err, stdout, stderr) => {
      if (!err) return resolve({ ok: true, stdout: String(stdout).trim() });
      const code = (err as NodeJS.ErrnoException & { code?: unknown }).code;
      if (typeof code === 'number') return resolve({ ok: false, why: `exit ${code}: ${String(stderr).trim().split('\n').pop() ?? ''}` });
      resolve({ ok: false, why: `cannot run it: ${err.message}` });
    });
  });
}

const isStrings = (v: unknown): v is string[] => Array.isArray(v) && v.length > 0 && v.every((s) => typeof s === 'string');

/** One --list-engines row, or null when it lacks a fact (a sidecar from before protocol 4 lists names only). */
function engineFacts(e: Record<string, unknown>): EngineFacts | null {
  const { name, built, precisions, default_precision: def, host_cores: hostCores, unbuilt_reason: why } = e;
  if (typeof name !== 'string' || typeof built !== 'boolean' || !isStrings(precisions) || typeof def !== 'string' || !precisions.includes(def) || typeof hostCores !== 'boolean') return null;
  return { name, built, precisions, defaultPrecision: def, hostCores, ...(typeof why === 'string' ? { unbuiltReason: why } : {}) };
}

/** The parsed list; exported for its test. Null when the output is not the documented JSON line. */
export function parseEngineList(stdout: string): SidecarEngines | null {
  try {
    const { engines } = JSON.parse(stdout) as { engines: Array<Record<string, unknown>> };
    const facts = engines.map(engineFacts);
    if (!facts.every((f): f is EngineFacts => f !== null)) return null;
    return {
      built: facts.filter((e) => e.built).map((e) => e.name),
      unbuilt: new Map(facts.filter((e) => !e.built).map((e) => [e.name, e.unbuiltReason ?? ''])),
      engines: new Map(facts.map((e) => [e.name, e])),
    };
  } catch {
    return null;
  }
}

// One question per executable and process: the CLI checks --engine and may pick a default from the same list.
const engineLists = new Map<string, Promise<SidecarEngines | null>>();

/** The engine list of the sidecar `env` selects, or null when there is no executable or it does not say. */
export function sidecarEngines(env: NodeJS.ProcessEnv = process.env): Promise<SidecarEngines | null> {
  const bin = sidecarBinary(env);
  let list = engineLists.get(bin);
  if (!list) {
    list = fs.existsSync(bin) ? ask(bin, '--list-engines', env).then((a) => (a.ok ? parseEngineList(a.stdout) : null)) : Promise.resolve(null);
    engineLists.set(bin, list);
  }
  return list;
}

export async function sidecarSelfReport(env: NodeJS.ProcessEnv = process.env): Promise<SidecarSelfReport> {
  const bin = sidecarBinary(env);
  if (!fs.existsSync(bin)) {
    return { path: bin, present: false, version: `not built (${bin} is missing: npm run build:sidecar)`, protocol: null, engines: null, engineFacts: null };
  }
  const [v, engines] = await Promise.all([ask(bin, '--version', env), sidecarEngines(env)]);
  const version = v.ok ? v.stdout : v.why;
  const proto = /protocol (\d+)/.exec(version);
  return { path: bin, present: true, version, protocol: proto ? Number(proto[1]) : null, engines: engines?.built ?? null, engineFacts: engines ? [...engines.engines.values()] : null };
}
