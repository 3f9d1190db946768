// What the sidecar executable says about itself (`--version`, and the engine list in `--help`), for
// `rfdetr --version` and `rfdetr info`. Never throws: a missing or broken executable is described instead.
import fs from 'node:fs';
import { execa } from 'execa';
import { sidecarBinary } from '../src/config/paths.ts';

export interface SidecarSelfReport {
  path: string;
  present: boolean;
  /** e.g. "rfdetr-sidecar 0.1.0 (protocol 1)", or why it could not be asked. */
  version: string;
  /** Protocol version parsed from --version, when it says. */
  protocol: number | null;
  /** Engines built in, parsed from --help ("built: cpu|tt-host"); null when it does not say. */
  engines: string[] | null;
}

export async function sidecarSelfReport(env: NodeJS.ProcessEnv = process.env): Promise<SidecarSelfReport> {
  const bin = sidecarBinary(env);
  if (!fs.existsSync(bin)) {
    return { path: bin, present: false, version: `not built (${bin} is missing: npm run build:sidecar)`, protocol: null, engines: null };
  }
  const ask = async (flag: string) => {
    try {
      const r = await execa(bin, [flag], { timeout: 10_000, reject: false, env: { ...env } });
      return r.exitCode === 0 ? String(r.stdout).trim() : `exit ${r.exitCode}: ${String(r.stderr).trim().split('\n').pop() ?? ''}`;
    } catch (e) {
      return `cannot run it: ${(e as Error).message}`;
    }
  };
  const [version, help] = await Promise.all([ask('--version'), ask('--help')]);
  const proto = /protocol (\d+)/.exec(version);
  const built = /built: ([^)\n]*)/.exec(help);
  const engines = built ? built[1]!.split('|').map((s) => s.trim()).filter((s) => s && s !== 'none') : null;
  return { path: bin, present: true, version, protocol: proto ? Number(proto[1]) : null, engines };
}
