// `rfdetr track [FILE|-]`: ByteTrack ids onto `rfdetr detect --json` NDJSON. The definition only; the work
// loads when the command runs, so --help stays fast.
import { Command } from 'commander';
import type { CliContext } from '../context.ts';
import { EXIT_HELP } from '../failures.ts';
import { addTrackerOptions, type TrackerFlags } from '../track-options.ts';

export function trackCommand(ctx: CliContext): Command {
  const cmd = new Command('track')
    .description('add ByteTrack track ids to `rfdetr detect --json` output: one NDJSON line per frame in, the same line with track_id on every detection out')
    .argument('[file]', 'NDJSON file, one line per frame in order; - or nothing reads stdin', '-');
  addTrackerOptions(cmd);
  return cmd
    .addHelpText('after', `${EXIT_HELP}

Each detection gets "track_id": a number, or null where the tracker gives none (a track not yet confirmed,
an unmatched low-score box). Order and count of lines and detections are kept; lines with a "source" are
tracked per source; a JSON object without "detections" (a summary line) is passed through unchanged.
A frame may have at most 300 detections (the most rfdetr detect --json gives; the assignment's cost grows as
n³ in them): a frame with more stops the run naming its line (exit 1); keep the best-scoring 300 first.
Example: rfdetr detect --json frames/ | rfdetr track > tracks.ndjson`)
    .action(async (file: string, f: TrackerFlags) => (await import('./track-run.ts')).runTrack(ctx, file, f));
}
