// `rfdetr bench`: latency p50/p90/p99 of the engine and end to end, with the stage split. The definition only; the work (and its heavy modules) loads when the command runs, so --help stays fast.
import { Command, Option } from 'commander';
import type { CliContext } from '../context.ts';
import { addEngineOptions } from '../engine-flags.ts';
import { EXIT_HELP } from '../failures.ts';
import { intParser } from '../parsers.ts';
import type { BenchFlags } from './bench-run.ts';

export function benchCommand(ctx: CliContext): Command {
  const cmd = new Command('bench')
    .description('latency p50/p90/p99 of the engine and end to end, with the stage split (warm-up excluded)')
    .addOption(new Option('-n, --n <count>', 'requests measured').argParser(intParser(1, 100_000)).default(20))
    .addOption(new Option('--warmup <count>', 'requests run first and not measured').argParser(intParser(0, 1000)).default(2))
    .addOption(new Option('--concurrency <c>', 'requests in flight at once').argParser(intParser(1, 256)).default(1))
    .option('--image <file>', 'image to run (default: the bundled fixture case-1, 640x480)')
    .option('--url <url>', 'measure a running server instead of an in-process engine')
    .option('--json', 'print one JSON object');
  addEngineOptions(cmd);
  return cmd.addHelpText('after', EXIT_HELP).action(async (f: BenchFlags) => (await import('./bench-run.ts')).runBench(ctx, f));
}
