// `rfdetr verify`: an accelerator engine against the CPU engine on the fixture images. The definition only;
// the work (sharp, the engines) loads when the command runs, so --help stays fast.
import { Command, InvalidArgumentError, Option } from 'commander';
import type { CliContext } from '../context.ts';
import { addEngineOptions } from '../engine-flags.ts';
import { EXIT_HELP } from '../failures.ts';
import { parseThreshold } from '../parsers.ts';
import type { VerifyFlags } from './verify-run.ts';

export const VERIFY_GATE = 98.5;

function parseGate(v: string): number {
  const n = Number(v);
  if (v.trim() === '' || !Number.isFinite(n) || n < 0 || n > 100) throw new InvalidArgumentError(`expected a detection-IoU from 0 to 100 but received ${JSON.stringify(v)}`);
  return n;
}

export function verifyCommand(ctx: CliContext): Command {
  const cmd = new Command('verify')
    .description('compare an accelerator engine with the CPU engine on the fixture images: detection-IoU gate, max-abs, PCC')
    .addOption(new Option('--gate <iou>', 'minimum mean detection-IoU (×100)').argParser(parseGate).default(VERIFY_GATE))
    .addOption(new Option('--threshold <t>', 'score threshold for both engines\' detections').argParser(parseThreshold).default(0.5))
    .option('--json', 'print one JSON object');
  addEngineOptions(cmd, { describe: 'tt when this build has it, else tt-host' });
  return cmd.addHelpText('after', `${EXIT_HELP}\n\nverify exits 1 when the mean detection-IoU is below the gate.`).action(async (f: Omit<VerifyFlags, 'engine'> & { engine?: string }) => (await import('./verify-run.ts')).runVerify(ctx, f));
}
