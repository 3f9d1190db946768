// `rfdetr detect INPUT...`. The definition only; the work (sharp, the engine, the HTTP client) loads when the
// command runs, so --help stays fast.
import { Command, Option } from 'commander';
import type { CliContext } from '../context.ts';
import { addEngineOptions } from '../engine-flags.ts';
import { EXIT_HELP } from '../failures.ts';
import { intParser, parseClasses, parseThreshold } from '../parsers.ts';
import type { DetectFlags } from './detect-run.ts';

export function detectCommand(ctx: CliContext): Command {
  const cmd = new Command('detect')
    .description('detect objects in images: files, directories, globs or - (stdin)')
    .argument('<inputs...>', 'image files, directories (--recursive for subdirectories), globs, http(s):// URLs, or - for stdin')
    .addOption(new Option('--threshold <t>', 'keep detections with score > t').argParser(parseThreshold).default(0.5))
    .addOption(new Option('--max-detections <n>', 'keep at most n detections per image (highest scores)').argParser(intParser(1, 300)).default(100))
    .addOption(new Option('--classes <names>', 'keep only these classes: names or ids, comma-separated (cat,dog)').argParser(parseClasses))
    .option('--raw', 'include raw logits [300][91] and pred_boxes [300][4] (as /predict return_raw)')
    .option('--json', 'stdout: one compact JSON line per image (the /predict response plus "image"), nothing else')
    .option('--save <dir>', 'write annotated copies (boxes, labels, scores) into dir: JPEG for .jpg/.jpeg inputs, PNG otherwise')
    .option('-r, --recursive', 'also take images from subdirectories of directory inputs')
    .option('--url <url>', 'send the images to a running server (rfdetr serve) instead of starting an engine');
  addEngineOptions(cmd);
  cmd.addHelpText('after', `${EXIT_HELP}\n\nAn input that names no image (missing path, empty directory, glob matching nothing) or an image that cannot be read or decoded is reported and skipped (no JSON line); the others still run and the exit status is 1.`);
  return cmd.action(async (inputs: string[], f: DetectFlags, c: Command) => (await import('./detect-run.ts')).runDetect(ctx, inputs, f, c));
}
