// `rfdetr weights fetch | verify | where | synth`: wiring only; the work is in src/weights.
// Errors are thrown, never turned into exits here: RfdetrError E_USAGE and commander's own parse errors are usage
// errors (exit 2), other errors are runtime errors (exit 1); `exitCodeFor` states that mapping for cli/main.ts.
import { Command, CommanderError, Option } from 'commander';
import { RfdetrError } from '../../src/errors.ts';
import type { ResolvedWeights, ResolveWeightsOptions } from '../../src/weights/resolve.ts';
import type { VerifyReport } from '../../src/weights/verify.ts';
// The work (undici, execa) is imported inside each action: --help must not load it.
import { syntheticWarning } from '../../src/weights/synthetic.ts';
import type { ProgressStream } from '../../src/weights/hub-download.ts';

export interface WeightsCommandIo {
  /** stdout: results (one path, or JSON with --json). Default process.stdout. */
  out?: (text: string) => void;
  /** stderr: step logs, warnings, commander messages. Default process.stderr. */
  err?: (text: string) => void;
  /** Progress bar target (drawn only on a TTY). Default process.stderr. */
  progress?: ProgressStream | null;
  env?: NodeJS.ProcessEnv;
}

/** 0 ok (and help), 2 usage errors, 1 everything else. */
export function exitCodeFor(e: unknown): number {
  if (e instanceof CommanderError) return e.exitCode === 0 ? 0 : 2;
  if (e instanceof RfdetrError && e.code === 'E_USAGE') return 2;
  return 1;
}

interface HubFlags {
  model?: string;
  revision?: string;
  weights?: string;
  json?: boolean;
}

function hubOptions(cmd: Command, withWeights: boolean): Command {
  cmd.addOption(new Option('--model <repo>', 'Hub repo id (default: HF_MODEL, else Roboflow/rf-detr-base)'));
  cmd.addOption(new Option('--revision <sha>', 'commit sha, branch or tag (default: TT_WEIGHTS_REVISION, TT_MODEL_WEIGHTS_REVISION, else the pinned sha)'));
  if (withWeights) cmd.addOption(new Option('--weights <dir>', 'a directory with model.safetensors + config.json (beats TT_RF_DETR_WEIGHTS)'));
  return cmd;
}

function describe(r: ResolvedWeights): string[] {
  return [
    `winner: ${r.source}  ${r.dir}`,
    `  repo      ${r.repo ?? '(a local directory)'}`,
    `  revision  ${r.revision ?? '-'}`,
    `  commit    ${r.commit ?? '(unknown)'}`,
    `  model     ${r.files.model}`,
    `  config    ${r.files.config}`,
    ...(r.synthetic ? [`  SYNTHETIC weights (rfdetr weights synth${r.syntheticSeed ? `, seed ${r.syntheticSeed}` : ''}): detections are meaningless`] : []),
  ];
}

function describeReport(v: VerifyReport): string[] {
  const lines = [
    `model   ${v.model.path}: ${v.model.bytes} bytes, ${v.model.tensors} tensors, ${v.model.numClasses ?? '?'} classes, variant ${v.model.variant ?? '?'} (${v.model.layout ?? '?'} key names)`,
    `config  ${v.config.path}: ${v.config.labels ?? '?'} labels`,
  ];
  for (const which of ['model', 'config'] as const) {
    const h = v[which].hash;
    if (!h) continue;
    lines.push(h.against === 'etag'
      ? `${which.padEnd(7)} ${h.kind} ${h.ok ? 'matches' : 'DOES NOT MATCH'} the cache etag ${h.expected}`
      : `${which.padEnd(7)} sha256 ${h.actual} (not a Hub cache blob: no reference hash to compare)`);
  }
  lines.push(`schema  ${v.schema}`);
  return lines;
}

export function weightsCommand(io: WeightsCommandIo = {}): Command {
  const out = io.out ?? ((s: string) => void process.stdout.write(s));
  const err = io.err ?? ((s: string) => void process.stderr.write(s));
  const env = io.env ?? process.env;
  const progress = io.progress === undefined ? process.stderr : io.progress;
  const line = (s: string) => out(`${s}\n`);
  const logLine = (s: string) => err(`${s}\n`);
  const base = (f: HubFlags): ResolveWeightsOptions => ({ env, model: f.model, revision: f.revision, weightsDir: f.weights, log: logLine, progress });
  const warnSynthetic = (r: ResolvedWeights) => {
    if (r.synthetic) logLine(syntheticWarning(r.dir, { synthetic: true, seed: r.syntheticSeed }));
  };

  const weights = new Command('weights')
    .description('find, download, verify or synthesize an RF-DETR checkpoint (default Roboflow/rf-detr-base)')
    .exitOverride()
    .configureOutput({ writeOut: out, writeErr: err });

  hubOptions(weights.command('fetch'), false)
    .description('download model.safetensors + config.json into the Hub cache (or confirm the cache has them); prints the snapshot directory')
    .option('--json', 'print the resolution as one JSON object')
    .action(async (f: HubFlags) => {
      const { resolveWeights } = await import('../../src/weights/resolve.ts');
      const r = await resolveWeights({ ...base(f), hubOnly: true, refresh: true });
      warnSynthetic(r);
      if (f.json) line(JSON.stringify(r));
      else line(r.dir);
      logLine(`weights: ${r.source === 'download' ? 'downloaded' : 'already cached'}; check them with: rfdetr weights verify`);
    });

  hubOptions(weights.command('verify'), true)
    .description('check the resolved checkpoint: hashes against the cache etags, header and tensors against the schema, config.json id2label')
    .option('--json', 'print the report as one JSON object')
    .option('--no-hashes', 'skip hashing the files (schema and config checks only)')
    .action(async (f: HubFlags & { hashes: boolean }) => {
      const [{ resolveWeights }, { verifyWeights }] = await Promise.all([import('../../src/weights/resolve.ts'), import('../../src/weights/verify.ts')]);
      const r = await resolveWeights({ ...base(f), download: false });
      const v = await verifyWeights(r.files, { hashes: f.hashes });
      warnSynthetic(r);
      const ok = r.synthetic ? 'OK: the checkpoint matches the schema; it is SYNTHETIC (rfdetr weights synth): detections are meaningless' : 'OK: the checkpoint matches the schema';
      if (f.json) line(JSON.stringify({ weights: r, report: v }));
      else for (const l of [...describeReport(v), v.ok ? ok : 'FAILED:', ...v.problems.map((p) => `  - ${p}`)]) line(l);
      if (!v.ok) {
        throw new RfdetrError('E_WEIGHTS_INVALID', `${r.dir}: ${v.problems.length} problem(s); expected the published files (rfdetr weights fetch) or a synthetic checkpoint (rfdetr weights synth)`, { problems: v.problems });
      }
    });

  hubOptions(weights.command('where'), true)
    .description('print the resolution chain (every step tried) and the winner; never downloads')
    .option('--json', 'print the resolution as one JSON object')
    .action(async (f: HubFlags) => {
      let r: ResolvedWeights;
      try {
        const { resolveWeights } = await import('../../src/weights/resolve.ts');
        r = await resolveWeights({ ...base(f), log: undefined, download: false });
        warnSynthetic(r);
      } catch (e) {
        const chain = (e instanceof RfdetrError ? (e.details?.chain as string[] | undefined) : undefined) ?? [];
        if (f.json) line(JSON.stringify({ error: { code: (e as RfdetrError).code, message: (e as Error).message }, chain }));
        throw e;
      }
      if (f.json) {
        line(JSON.stringify(r));
        return;
      }
      line('resolution chain:');
      r.chain.forEach((c, i) => line(`  ${i + 1}. ${c}`));
      for (const l of describe(r)) line(l);
    });

  hubOptions(weights.command('synth'), false)
    .description('write a synthetic checkpoint (rfdetr-synth SPEC v1) + config.json for demos and tests: its detections are MEANINGLESS')
    .requiredOption('--seed <n>', 'generator seed, decimal or 0x-hex, up to 64 bits')
    .requiredOption('--out <dir>', 'output directory')
    .option('--num-classes <n>', 'class count (default 91, COCO)')
    .option('--variant <name>', 'RF-DETR size: base (default), nano, small, medium, large, large_deprecated; RF-DETR Seg: seg-nano, seg-small, seg-medium, seg-large, seg-xlarge, seg-2xlarge')
    .action(async (f: HubFlags & { seed: string; out: string; numClasses?: string; variant?: string }) => {
      const { formatSeed, parseNumClasses, parseSeed, parseVariant, runSynth } = await import('../../src/weights/synth.ts');
      const seed = parseSeed(f.seed);
      const numClasses = f.numClasses !== undefined ? parseNumClasses(f.numClasses) : undefined;
      const variant = f.variant !== undefined ? parseVariant(f.variant) : undefined;
      if (f.model !== undefined || f.revision !== undefined) logLine('weights synth: --model/--revision do not apply to a synthetic checkpoint; ignored');
      const r = await runSynth({ seed, out: f.out, numClasses, variant, env, onStdout: err, onStderr: err });
      logLine(`WARNING: ${r.dir} holds a SYNTHETIC ${r.report.model.variant ?? 'base'} checkpoint (seed ${formatSeed(seed)}): its detections are meaningless. Use it for demos and tests only.`);
      line(r.dir);
    });

  return weights;
}
