// The package version from package.json, and the `rfdetr --version` text.
import fs from 'node:fs';
import path from 'node:path';
import { packageRoot } from '../src/config/paths.ts';
import { sidecarSelfReport } from './sidecar-info.ts';

export function packageVersion(): string {
  return (JSON.parse(fs.readFileSync(path.join(packageRoot, 'package.json'), 'utf8')) as { version: string }).version;
}

/**
 * The protocol line: this client's version and the sidecar's, with what a difference means. The client speaks
 * its own version and the one before `variant` (sidecar/PROTOCOL.md, "Versions"), so only other versions need a
 * rebuild.
 */
export function protocolLine(client: number, withoutVariant: number, sidecar: number | null): string {
  const note = sidecar === null || sidecar === client
    ? ''
    : sidecar === withoutVariant
      ? ' — an older sidecar this client still serves (its hello names no variant: /info says Base); rebuild it to have its variant named (npm run build:sidecar)'
      : ' — MISMATCH: rebuild the sidecar (npm run build:sidecar)';
  return `protocol: ${client} (this client), ${sidecar ?? 'unknown'} (the sidecar)${note}`;
}

/** Three lines: the package, the sidecar build (and the protocol it speaks), the protocol this client speaks. */
export async function versionText(env: NodeJS.ProcessEnv): Promise<string> {
  const [s, { PROTOCOL_VERSION, PROTOCOL_VERSION_WITHOUT_VARIANT }] = await Promise.all([sidecarSelfReport(env), import('../src/protocol/codec.ts')]);
  return [`rfdetr-serve ${packageVersion()}`, `sidecar: ${s.version}`, protocolLine(PROTOCOL_VERSION, PROTOCOL_VERSION_WITHOUT_VARIANT, s.protocol)].join('\n');
}
