// What the sidecar executable says about itself (`--version`, and the engine list in `--help`), for
// `rfdetr --version` and `rfdetr info`. Never throws: a missing or broken executable is described instead.
import fs from 'node:fs';
import { execFile } from 'node:child_process';
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
  // node:child_process, not execa: importing execa costs ~0.25 s of CPU, a third of `rfdetr --version`.
  const ask = (flag: string) => new Promise<string>((resolve) => {
    execFile(bin, [flag], { timeout: 10_000, env: { ...env } }, (err, stdout, stderr) => {
      if (!err) return resolve(String(stdout).trim());
      const code = (err as NodeJS.ErrnoException & { code?: unknown }).code;
      if (typeof code === 'number') return resolve(`exit ${code}: ${String(stderr).trim().split('\n').pop() ?? ''}`);
      resolve(`cannot run it: ${err.message}`);
    });
  });
  const [version, help] = await Promise.all([ask('--version'), ask('--help')]);
  const proto = /protocol (\d+)/.exec(version);
  const built = /built: ([^)\n]*)/.exec(help);
  const engines = built ? built[1]!.split('|').map((s) => s.trim()).filter((s) => s && s !== 'none') : null;
  return { path: bin, present: true, version, protocol: proto ? Number(proto[1]) : null, engines };
}
