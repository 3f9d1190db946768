// `rfdetr info`: versions, engines, where the weights would load from, the device. The definition only; the work (and its heavy modules) loads when the command runs, so --help stays fast.
import { Command } from 'commander';
import type { CliContext } from '../context.ts';
import type { InfoFlags } from './info-run.ts';

export function infoCommand(ctx: CliContext): Command {
  return new Command('info')
    .description('versions, engines built into the sidecar, where the weights would load from, and the device')
    .option('--json', 'print one JSON object')
    .option('--weights <dir>', 'check this checkpoint directory instead of the default resolution')
    .option('--model <repo>', 'Hub repo id to look for in the cache')
    .option('--revision <sha>', 'Hub revision to look for in the cache')
    .action(async (f: InfoFlags) => (await import('./info-run.ts')).runInfo(ctx, f));
}
