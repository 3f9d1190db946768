// `rfdetr info`: versions (package, sidecar, protocol), the engines built into the sidecar, where the weights
// would be loaded from (never downloads), and the device. Starts no engine; exit 0 even when weights are
// missing (that is information: it prints the chain tried and the commands that fix it).
import fs from 'node:fs';
import os from 'node:os';
import { RfdetrError } from '../../src/errors.ts';
import { resolveWeights } from '../../src/weights/resolve.ts';
import { syntheticWarning } from '../../src/weights/synthetic.ts';
import type { CliContext } from '../context.ts';
import { PROTOCOL_VERSION } from '../../src/protocol/codec.ts';
import { packageVersion } from '../version.ts';
import { sidecarSelfReport } from '../sidecar-info.ts';
import { precisionsText } from '../engine-check.ts';
import { ffmpegVersion } from '../../src/video/ffmpeg.ts';

export interface DeviceReport {
  cpu: string;
  logicalCores: number;
  avx2: boolean;
  avx512f: boolean;
  /** Tenstorrent device nodes present (/dev/tenstorrent/N). */
  tenstorrent: string[];
}

export function deviceReport(): DeviceReport {
  let flags = '';
  try {
    flags = /^flags\s*:(.*)$/m.exec(fs.readFileSync('/proc/cpuinfo', 'utf8'))?.[1] ?? '';
  } catch {
    // not Linux: flags unknown
  }
  const has = (f: string) => new RegExp(`\\b${f}\\b`).test(flags);
  let tt: string[] = [];
  try {
    tt = fs.readdirSync('/dev/tenstorrent').map((n) => `/dev/tenstorrent/${n}`);
  } catch {
    // no driver or no card
  }
  return { cpu: os.cpus()[0]?.model ?? 'unknown', logicalCores: os.availableParallelism(), avx2: has('avx2'), avx512f: has('avx512f'), tenstorrent: tt };
}

export interface InfoFlags {
  json?: boolean;
  weights?: string;
  model?: string;
  revision?: string;
}

export async function runInfo(ctx: CliContext, f: InfoFlags): Promise<void> {
  const sidecar = await sidecarSelfReport(ctx.env);
  let weights: Record<string, unknown>;
  try {
    const w = await resolveWeights({ env: ctx.env, weightsDir: f.weights, model: f.model, revision: f.revision, download: false });
    weights = { found: true, dir: w.dir, source: w.source, repo: w.repo, revision: w.revision, commit: w.commit, synthetic: w.synthetic, chain: w.chain };
    if (w.synthetic) ctx.stderr.write(`${syntheticWarning(w.dir, { synthetic: true, seed: w.syntheticSeed })}\n`);
  } catch (e) {
    if (!(e instanceof RfdetrError)) throw e;
    weights = { found: false, error: e.message, chain: (e.details?.chain as string[] | undefined) ?? [] };
  }
  const device = deviceReport();
  const ffmpeg = await ffmpegVersion(ctx.env);
  const report = {
    package: { name: 'rfdetr-serve', version: packageVersion() },
    node: process.version,
    sidecar: { path: sidecar.path, present: sidecar.present, version: sidecar.version, protocol: sidecar.protocol },
    protocol: { client: PROTOCOL_VERSION, sidecar: sidecar.protocol },
    engines: sidecar.engines,
    // Per engine, built or not: the precisions it runs (default first) and whether it computes on the host's cores.
    engine_facts: sidecar.engineFacts?.map((e) => ({ name: e.name, built: e.built, precisions: e.precisions, default_precision: e.defaultPrecision, host_cores: e.hostCores })) ?? null,
    weights,
    device,
    ffmpeg: { present: ffmpeg !== null, version: ffmpeg },
  };
  if (f.json) {
    ctx.stdout.write(`${JSON.stringify(report)}\n`);
    return;
  }
  const out = (s: string) => void ctx.stdout.write(`${s}\n`);
  out(`rfdetr-serve ${report.package.version} (node ${report.node})`);
  out(`sidecar   ${sidecar.version}`);
  out(`          ${sidecar.path}`);
  out(`protocol  ${PROTOCOL_VERSION} (this client), ${sidecar.protocol ?? 'unknown'} (the sidecar)`);
  const built = sidecar.engineFacts?.filter((e) => e.built);
  out(`engines   ${built ? built.map((e) => `${e.name}: ${precisionsText(e)}`).join('; ') : '(unknown: the sidecar did not list them)'}`);
  if (weights.found) {
    out(`weights   ${String(weights.dir)} (${String(weights.source)}${weights.commit ? `, commit ${String(weights.commit)}` : ''})${weights.synthetic ? ' SYNTHETIC: detections are meaningless' : ''}`);
  } else {
    out('weights   NOT FOUND; tried:');
    for (const c of weights.chain as string[]) out(`            - ${c}`);
    out('          fix: rfdetr weights fetch   (download the pinned checkpoint into the Hub cache)');
    out('           or: --weights DIR / TT_RF_DETR_WEIGHTS=DIR   (a directory with model.safetensors + config.json)');
  }
  out(`ffmpeg    ${ffmpeg ?? 'NOT FOUND: videos need it (images do not): sudo apt-get install -y ffmpeg'}`);
  out(`device    ${device.cpu}, ${device.logicalCores} logical cores, AVX2 ${device.avx2 ? 'yes' : 'NO (the CPU engine needs AVX2)'}, AVX-512 ${device.avx512f ? 'yes' : 'no'}`);
  out(`          Tenstorrent: ${device.tenstorrent.length ? device.tenstorrent.join(', ') : 'no device nodes (/dev/tenstorrent absent)'}`);
}
