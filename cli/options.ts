// Option parsers and the options several subcommands share. A malformed value is a usage error (exit 2) that
// names the flag, what was expected and what was received.
import { Command, InvalidArgumentError, Option } from 'commander';
import { RfdetrError } from '../src/errors.ts';
import { resolveClassList, someNames } from '../src/detect/classes.ts';
import type { ResolvedWeights } from '../src/weights/resolve.ts';
import { syntheticWarning } from '../src/weights/synthetic.ts';
import type { BackendRequest, CliContext } from './context.ts';
import { sidecarSelfReport } from './sidecar-info.ts';
import { stage } from './stage.ts';
import type { InferenceBackend } from '../src/sidecar/backend.ts';

function received(v: string): string {
  return JSON.stringify(v);
}

export function parseThreshold(v: string): number {
  const n = Number(v);
  if (v.trim() === '' || !Number.isFinite(n) || n < 0 || n > 1) throw new InvalidArgumentError(`expected a number from 0 to 1 but received ${received(v)}`);
  return n;
}

export function intParser(min: number, max: number): (v: string) => number {
  return (v: string) => {
    const n = Number(v);
    if (!/^\s*\d+\s*$/.test(v) || !Number.isSafeInteger(n) || n < min || n > max) {
      throw new InvalidArgumentError(`expected an integer from ${min} to ${max} but received ${received(v)}`);
    }
    return n;
  };
}

export function positiveNumber(v: string): number {
  const n = Number(v);
  if (v.trim() === '' || !Number.isFinite(n) || n < 0) throw new InvalidArgumentError(`expected a number >= 0 but received ${received(v)}`);
  return n;
}

export function parseClasses(v: string, prev: string[] | undefined): string[] {
  const items = v.split(',').map((s) => s.trim()).filter((s) => s.length > 0);
  if (items.length === 0) throw new InvalidArgumentError(`expected class names or ids separated by commas (e.g. cat,dog) but received ${received(v)}`);
  return [...(prev ?? []), ...items];
}

/** Class names (or numeric ids) → class indices in `labels`; unknown names are a usage error naming them. */
export function resolveClasses(names: readonly string[] | undefined, labels: readonly string[]): Set<number> | undefined {
  if (!names || names.length === 0) return undefined;
  const { ids, unknown, known } = resolveClassList(names, labels);
  if (unknown.length) {
    throw new RfdetrError('E_USAGE', `--classes: unknown class ${unknown.map((u) => JSON.stringify(u)).join(', ')}; expected names from the model's labels (${someNames(known)}) or class ids 0..${labels.length - 1}`);
  }
  return ids;
}

export interface EngineFlags {
  engine: string;
  threads?: number;
  precision?: 'fp32' | 'bf16' | 'int8';
  weights?: string;
  model?: string;
  revision?: string;
}

/** --engine, --threads, --weights, --model, --revision. */
export function addEngineOptions(cmd: Command, defaultEngine: string | { describe: string } = 'cpu'): Command {
  const engine = new Option('--engine <name>', `engine the sidecar runs: cpu, tt (Blackhole; compiles and links against ttnn 0.70.1, calls checked against 0.78.0, never run on a card), tt-host, … (rfdetr info lists those built)${typeof defaultEngine === 'string' ? '' : ` (default: ${defaultEngine.describe})`}`);
  return cmd
    .addOption(typeof defaultEngine === 'string' ? engine.default(defaultEngine) : engine)
    .addOption(new Option('--threads <n>', 'CPU threads for the engine, 0 = physical cores').argParser(intParser(0, 1024)))
    .addOption(new Option('--precision <p>', 'engine arithmetic: fp32 (default); bf16 (tt-host); int8 (cpu: int8 weight GEMMs, check it with verify first)').choices(['fp32', 'bf16', 'int8']))
    .addOption(new Option('--weights <dir>', 'checkpoint directory with model.safetensors + config.json (beats TT_RF_DETR_WEIGHTS)'))
    .addOption(new Option('--model <repo>', 'Hub repo id (default: HF_MODEL, else Roboflow/rf-detr-base)'))
    .addOption(new Option('--revision <sha>', 'Hub revision (default: TT_WEIGHTS_REVISION, else the pinned sha)'));
}

/** Engines a full build can have; the ones a given build lacks are named with how to get them. */
const KNOWN_ENGINES: Record<string, string> = {
  cpu: 'the CPU engine is always built; rebuild the sidecar (npm run build:sidecar)',
  tt: "tt needs a sidecar built with RFDETR_CMAKE_ARGS='-DRFDETR_WITH_TTNN=ON' against ttnn (SERVING.md, \"TT engine\"); --engine tt-host runs the same graph on the CPU",
  'tt-host': 'rebuild the sidecar (npm run build:sidecar)',
};

/**
 * The engines this build's sidecar offers (from its --help), or null when that cannot be told (no executable:
 * the launch then reports it).
 */
export async function builtEngines(ctx: CliContext): Promise<string[] | null> {
  return (await sidecarSelfReport(ctx.env)).engines;
}

/** A misspelt or unbuilt --engine is a usage error (exit 2) before anything starts. */
export async function checkEngine(ctx: CliContext, engine: string): Promise<void> {
  const built = await builtEngines(ctx);
  if (built === null || built.includes(engine)) return;
  const how = KNOWN_ENGINES[engine];
  throw new RfdetrError('E_USAGE', `--engine ${JSON.stringify(engine)}: ${how ? 'not built into this sidecar' : 'no such engine'}; this build has ${built.join(', ') || 'none'}${how ? `. ${how}` : ''}`);
}

export function stderrLine(ctx: CliContext): (line: string) => void {
  return (line: string) => void ctx.stderr.write(`${line}\n`);
}

/** Resolves the weights for an engine run (downloading when allowed and needed), logging each step to stderr. */
export async function weightsFor(ctx: CliContext, f: EngineFlags, opts: { download?: boolean } = {}): Promise<ResolvedWeights> {
  if (f.weights !== undefined && (f.model !== undefined || f.revision !== undefined)) {
    throw new RfdetrError('E_USAGE', '--weights DIR names the checkpoint directly; it cannot be combined with --model/--revision (use one or the other)');
  }
  await checkEngine(ctx, f.engine);
  const { resolveWeights } = await import('../src/weights/resolve.ts');
  const w = await resolveWeights({
    env: ctx.env, weightsDir: f.weights, model: f.model, revision: f.revision,
    download: opts.download ?? true, log: stderrLine(ctx), progress: ctx.stderr,
  });
  if (w.synthetic) stderrLine(ctx)(syntheticWarning(w.dir, { synthetic: true, seed: w.syntheticSeed }));
  return w;
}

/** Opens the engine for a one-shot command, telling the slow start (load + warm-up) on stderr. */
export function openEngine(ctx: CliContext, command: string, req: BackendRequest): Promise<InferenceBackend> {
  return stage(ctx.stderr, `${command}: starting the ${req.engine} engine (loading the weights, warm-up)`, () => ctx.openBackend(req),
    (b) => `ready${b.info ? ` (${b.info.engine} on ${b.info.device})` : ''}`);
}

export function backendRequest(ctx: CliContext, f: EngineFlags, weightsDir: string, extra: Partial<BackendRequest> = {}): BackendRequest {
  return { engine: f.engine, weightsDir, threads: f.threads, precision: f.precision, log: stderrLine(ctx), ...extra };
}

export const EXIT_HELP = [
  '',
  'Exit status:',
  '  0  success',
  '  1  runtime error (missing or unreadable input, no weights, engine or server failure, smoke/verify FAIL)',
  '  2  usage error (unknown flag, malformed or out-of-range value)',
].join('\n');
