// `rfdetr verify`: an engine against a reference engine on the fixture images (an accelerator against cpu fp32,
// a reduced cpu precision against its fp32 with the proposal order held, or any two with --against). The
// definition only; the work (sharp, the engines) loads when the command runs, so --help stays fast.
import { Command, InvalidArgumentError, Option } from 'commander';
import type { CliContext } from '../context.ts';
import { addEngineOptions } from '../engine-flags.ts';
import { EXIT_HELP } from '../failures.ts';
import { parseThreshold } from '../parsers.ts';
import type { VerifyFlags } from './verify-run.ts';

/** The detection-IoU gate of an accelerator against cpu fp32 (the port's). */
export const VERIFY_GATE = 98.5;

function parseGate(v: string): number {
  const n = Number(v);
  if (v.trim() === '' || !Number.isFinite(n) || n < 0 || n > 100) throw new InvalidArgumentError(`expected a detection-IoU from 0 to 100 but received ${JSON.stringify(v)}`);
  return n;
}

const CHECKS = `
What is compared, per fixture image (test/fixtures/rfdetr-synth case-1..3; no --weights: the seed-1 synthetic
checkpoint they were made with): detection-IoU against the reference (mean x 100), max-abs and PCC of logits
and boxes, and the top-100 overlap of the logits with the reference's and with the fp32 golden.
  --engine tt|tt-host            against cpu fp32; exit 1 below the mean detection-IoU gate (${VERIFY_GATE})
  --engine cpu --precision P     a reduced precision (int8, bf16 where built) against cpu fp32, and again with
                                 fp32's proposal order held (sidecar/build/rfdetr-accuracy): exit 1 unless every
                                 case keeps a held-order logits PCC >= 0.999 and top-100 >= 95. Detection-IoU and
                                 the end-to-end top-100 are reported, not gated (near-tied proposal scores change
                                 rank on the synthetic weights: SERVING.md, "int8 on the CPU engine")
  --against ENGINE[:P]           that engine as the reference instead (e.g. --engine tt-host --precision bf16
                                 --against cpu:bf16, the card's plan against the CPU's bf16): reported; gated on
                                 the detection-IoU only when --gate is given`;

export function verifyCommand(ctx: CliContext): Command {
  const cmd = new Command('verify')
    .description('compare an engine with a reference engine on the fixture images: an accelerator with cpu, a reduced cpu precision with its fp32 (held-order gates), or any two')
    .addOption(new Option('--gate <iou>', `minimum mean detection-IoU (×100); default ${VERIFY_GATE} for an accelerator against cpu fp32, none otherwise`).argParser(parseGate))
    .addOption(new Option('--against <engine[:precision]>', 'the reference engine (default: cpu at fp32), e.g. cpu:bf16'))
    .option('--family', 'with --engine cpu --precision P: the held-order check on the family fixtures too (../shared/fixtures/rfdetr-family, or RFDETR_FAMILY_FIXTURES: nano, small, medium, large), each on its seed-1 synthetic checkpoint')
    .addOption(new Option('--threshold <t>', 'score threshold for both engines\' detections').argParser(parseThreshold).default(0.5))
    .option('--json', 'print one JSON object');
  addEngineOptions(cmd, { describe: 'tt when this build has it, else tt-host' });
  return cmd.addHelpText('after', `${CHECKS}\n${EXIT_HELP}`).action(async (f: Omit<VerifyFlags, 'engine'> & { engine?: string }) => (await import('./verify-run.ts')).runVerify(ctx, f));
}
