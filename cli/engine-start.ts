// Starting the engine of a one-shot command (detect, bench, verify): the checkpoint resolved (downloaded when
// allowed and needed) and the backend opened, each step told on stderr.
import { RfdetrError } from '../src/errors.ts';
import type { InferenceBackend } from '../src/sidecar/backend.ts';
import type { ResolvedWeights } from '../src/weights/resolve.ts';
import { syntheticWarning } from '../src/weights/synthetic.ts';
import { stderrLine, type BackendRequest, type CliContext } from './context.ts';
import { checkEngine } from './engine-check.ts';
import type { EngineFlags } from './engine-flags.ts';
import { stage } from './stage.ts';

/** Resolves the weights for an engine run (downloading when allowed and needed), logging each step to stderr. */
export async function weightsFor(ctx: CliContext, f: EngineFlags, opts: { download?: boolean } = {}): Promise<ResolvedWeights> {
  if (f.weights !== undefined && (f.model !== undefined || f.revision !== undefined)) {
    throw new RfdetrError('E_USAGE', '--weights DIR names the checkpoint directly; it cannot be combined with --model/--revision (use one or the other)');
  }
  await checkEngine(ctx, f.engine, f.precision);
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
