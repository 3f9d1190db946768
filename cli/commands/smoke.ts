// `rfdetr smoke --url URL`: post one image to a running server, print PASS or FAIL. The definition only; the
// work (sharp, the HTTP client) loads when the command runs, so --help stays fast.
import path from 'node:path';
import { Command, InvalidArgumentError, Option } from 'commander';
import { testFixturesDir } from '../../src/config/paths.ts';
import type { CliContext } from '../context.ts';
import { EXIT_HELP } from '../failures.ts';
import { intParser, parseThreshold, positiveNumber } from '../parsers.ts';
import type { SmokeFlags } from './smoke-run.ts';

/** The bundled image posted when --image is not given (fixture case 1, 640x480). */
export const DEFAULT_SMOKE_IMAGE = path.join(testFixturesDir, 'rfdetr-synth', 'case-1', 'input.png');

export function parseExpect(v: string): Map<string, number> {
  const m = new Map<string, number>();
  for (const item of v.split(',').map((s) => s.trim()).filter(Boolean)) {
    const i = item.lastIndexOf(':');
    const label = item.slice(0, i).trim();
    const count = item.slice(i + 1).trim();
    if (i <= 0 || !/^\d+$/.test(count) || label === '') {
      throw new InvalidArgumentError(`expected label:count pairs separated by commas (e.g. cat:2,remote:2) but received ${JSON.stringify(item)}`);
    }
    m.set(label, Number(count));
  }
  if (m.size === 0) throw new InvalidArgumentError(`expected label:count pairs (e.g. cat:2) but received ${JSON.stringify(v)}`);
  return m;
}

export function smokeCommand(ctx: CliContext): Command {
  return new Command('smoke')
    .description('smoke-test a running server: wait for readiness, post an image, print PASS or FAIL (one line)')
    .requiredOption('--url <url>', 'the server, e.g. http://127.0.0.1:20000')
    .addOption(new Option('--wait <seconds>', 'wait up to this long for /ready (0: check once)').argParser(positiveNumber).default(0))
    .option('--out <file>', 'write the full /predict response JSON here')
    .option('--image <file>', `image to post (default: the bundled fixture ${path.relative(process.cwd(), DEFAULT_SMOKE_IMAGE) || DEFAULT_SMOKE_IMAGE})`)
    .addOption(new Option('--expect <label:count,...>', 'exact detection counts per label, e.g. cat:2,remote:2').argParser(parseExpect))
    .addOption(new Option('--threshold <t>', 'score threshold sent with the request').argParser(parseThreshold).default(0.5))
    .addOption(new Option('--min-detections <n>', 'FAIL with fewer detections than this').argParser(intParser(0, 300)).default(1))
    .addHelpText('after', `${EXIT_HELP}\n\nsmoke prints exactly one line on stdout: PASS n=<count> counts={...} or FAIL <reason>; exit 0 on PASS, 1 on FAIL.`)
    .action(async (f: SmokeFlags) => (await import('./smoke-run.ts')).runSmoke(ctx, f));
}
