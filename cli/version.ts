// The package version from package.json, and the `rfdetr --version` text.
import fs from 'node:fs';
import path from 'node:path';
import { packageRoot } from '../src/config/paths.ts';
import { sidecarSelfReport } from './sidecar-info.ts';

export function packageVersion(): string {
  return (JSON.parse(fs.readFileSync(path.join(packageRoot, 'package.json'), 'utf8')) as { version: string }).version;
}

/** Three lines: the package, the sidecar build (and the protocol it speaks), the protocol this client speaks. */
export async function versionText(env: NodeJS.ProcessEnv): Promise<string> {
  const [s, { PROTOCOL_VERSION }] = await Promise.all([sidecarSelfReport(env), import('../src/protocol/codec.ts')]);
  return [
    `rfdetr-serve ${packageVersion()}`,
    `sidecar: ${s.version}`,
    `protocol: ${PROTOCOL_VERSION} (this client), ${s.protocol ?? 'unknown'} (the sidecar)${s.protocol !== null && s.protocol !== PROTOCOL_VERSION ? ' — MISMATCH: rebuild the sidecar (npm run build:sidecar)' : ''}`,
  ].join('\n');
}
