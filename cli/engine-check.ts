// `--engine NAME` and `--precision P` checked against what this build's sidecar says of its engines
// (`rfdetr-sidecar --list-engines`), before anything starts: a misspelt or unbuilt engine, or a precision the
// engine does not run, is a usage error (exit 2) naming what there is.
import { RfdetrError } from '../src/errors.ts';
import type { CliContext } from './context.ts';
import { sidecarEngines, type EngineFacts } from './sidecar-info.ts';

/** The engines this build's sidecar offers, or null when that cannot be told (no executable: the launch then reports it). */
export async function builtEngines(ctx: CliContext): Promise<string[] | null> {
  return (await sidecarEngines(ctx.env))?.built ?? null;
}

/** The precisions as a user reads them: "fp32 (default), bf16". */
export function precisionsText(e: Pick<EngineFacts, 'precisions' | 'defaultPrecision'>): string {
  return e.precisions.map((p) => (p === e.defaultPrecision ? `${p} (default)` : p)).join(', ');
}

/**
 * The engine's facts once `engine` is built into this sidecar and runs `precision` (undefined: its default);
 * null when the sidecar cannot be asked (the launch then reports why).
 */
export async function checkEngine(ctx: CliContext, engine: string, precision?: string): Promise<EngineFacts | null> {
  const list = await sidecarEngines(ctx.env);
  if (list === null) return null;
  const facts = list.engines.get(engine);
  if (!facts?.built) {
    const how = list.unbuilt.get(engine);
    throw new RfdetrError('E_USAGE', `--engine ${JSON.stringify(engine)}: ${how !== undefined ? 'not built into this sidecar' : 'no such engine'}; this build has ${list.built.join(', ') || 'none'}${how ? `. ${how}` : ''}`);
  }
  if (precision !== undefined && !facts.precisions.includes(precision)) {
    throw new RfdetrError('E_USAGE', `--precision ${JSON.stringify(precision)}: the ${engine} engine runs ${precisionsText(facts)}; pick one of those, or leave --precision out for its default`);
  }
  return facts;
}
