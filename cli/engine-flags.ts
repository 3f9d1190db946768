// The flags every engine-running command shares (--engine, --threads, --precision, --weights, --model,
// --revision), and the type commander parses them into.
import { Command, Option } from 'commander';
import { intParser } from './parsers.ts';

export interface EngineFlags {
  engine: string;
  threads?: number;
  precision?: string;
  weights?: string;
  model?: string;
  revision?: string;
}

export function addEngineOptions(cmd: Command, defaultEngine: string | { describe: string } = 'cpu'): Command {
  const engine = new Option('--engine <name>', `engine the sidecar runs: cpu, tt (Blackhole; compiles and links against ttnn 0.70.1, calls checked against 0.78.0, never run on a card), tt-host, … (rfdetr info lists those built)${typeof defaultEngine === 'string' ? '' : ` (default: ${defaultEngine.describe})`}`);
  return cmd
    .addOption(typeof defaultEngine === 'string' ? engine.default(defaultEngine) : engine)
    .addOption(new Option('--threads <n>', 'CPU threads for the engine, 0 = physical cores').argParser(intParser(0, 1024)))
    .addOption(new Option('--precision <p>', 'engine arithmetic, one the engine runs (rfdetr info lists each engine\'s, its default first; check a reduced one against the cpu engine with verify); default: the engine\'s'))
    .addOption(new Option('--weights <dir>', 'checkpoint directory with model.safetensors + config.json (beats TT_RF_DETR_WEIGHTS)'))
    .addOption(new Option('--model <repo>', 'Hub repo id (default: HF_MODEL, else Roboflow/rf-detr-base)'))
    .addOption(new Option('--revision <sha>', 'Hub revision (default: TT_WEIGHTS_REVISION, else the pinned sha)'));
}
