// What the sidecar executable says about itself (`--version`, and `--list-engines`: the engines it has and how
// to build the ones it lacks), for `rfdetr --version`, `rfdetr info` and the --engine check. Never throws: a
// missing or broken executable is described instead.
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
}

/** `rfdetr-sidecar --list-engines`: the engines built in, and each known engine this build lacks with how to build it. */
export interface SidecarEngines {
  built: string[];
  unbuilt: Map<string, string>;
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

function parseEngines(a: Answer): SidecarEngines | null {
  if (!a.ok) return null;
  try {
    const { engines } = JSON.parse(a.stdout) as { engines: Array<{ name: string; built: boolean; unbuilt_reason?: string }> };
    return {
      built: engines.filter((e) => e.built).map((e) => e.name),
      unbuilt: new Map(engines.filter((e) => !e.built).map((e) => [e.name, e.unbuilt_reason ?? ''])),
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
    list = fs.existsSync(bin) ? ask(bin, '--list-engines', env).then(parseEngines) : Promise.resolve(null);
    engineLists.set(bin, list);
  }
  return list;
}

export async function sidecarSelfReport(env: NodeJS.ProcessEnv = process.env): Promise<SidecarSelfReport> {
  const bin = sidecarBinary(env);
  if (!fs.existsSync(bin)) {
    return { path: bin, present: false, version: `not built (${bin} is missing: npm run build:sidecar)`, protocol: null, engines: null };
  }
  const [v, engines] = await Promise.all([ask(bin, '--version', env), sidecarEngines(env)]);
  const version = v.ok ? v.stdout : v.why;
  const proto = /protocol (\d+)/.exec(version);
  return { path: bin, present: true, version, protocol: proto ? Number(proto[1]) : null, engines: engines?.built ?? null };
}
