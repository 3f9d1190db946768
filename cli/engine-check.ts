// `--engine NAME` checked against the engines this build's sidecar says it has (`rfdetr-sidecar
// --list-engines`), before anything starts: a misspelt or unbuilt engine is a usage error (exit 2).
import { RfdetrError } from '../src/errors.ts';
import type { CliContext } from './context.ts';
import { sidecarEngines } from './sidecar-info.ts';

/** The engines this build's sidecar offers, or null when that cannot be told (no executable: the launch then reports it). */
export async function builtEngines(ctx: CliContext): Promise<string[] | null> {
  return (await sidecarEngines(ctx.env))?.built ?? null;
}

export async function checkEngine(ctx: CliContext, engine: string): Promise<void> {
  const list = await sidecarEngines(ctx.env);
  if (list === null || list.built.includes(engine)) return;
  const how = list.unbuilt.get(engine);
  throw new RfdetrError('E_USAGE', `--engine ${JSON.stringify(engine)}: ${how !== undefined ? 'not built into this sidecar' : 'no such engine'}; this build has ${list.built.join(', ') || 'none'}${how ? `. ${how}` : ''}`);
}
