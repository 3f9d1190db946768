// The `rfdetr` program: one module per subcommand, one mapping from errors to exit codes. Runs in process
// with an injected context (tests) or from cli/main.ts with the real process.
import { Command, CommanderError } from 'commander';
import { RfdetrError } from '../src/errors.ts';
import { benchCommand } from './commands/bench.ts';
import { detectCommand } from './commands/detect.ts';
import { infoCommand } from './commands/info.ts';
import { serveCommand } from './commands/serve.ts';
import { smokeCommand } from './commands/smoke.ts';
import { trackCommand } from './commands/track.ts';
import { verifyCommand } from './commands/verify.ts';
import { EXIT_HELP, ImagesFailedError, SmokeFailure, VerifyFailure } from './failures.ts';
import { exitCodeFor, weightsCommand } from './commands/weights.ts';
import type { CliContext } from './context.ts';
import { versionText } from './version.ts';

function wire(cmd: Command, ctx: CliContext): Command {
  cmd.exitOverride().configureOutput({ writeOut: (s) => void ctx.stdout.write(s), writeErr: (s) => void ctx.stderr.write(s) });
  for (const sub of cmd.commands) wire(sub, ctx);
  return cmd;
}

export function buildProgram(ctx: CliContext): Command {
  const program = new Command('rfdetr')
    .description('RF-DETR-base object detection: detect in images, serve over HTTP, smoke-test, benchmark')
    .option('-V, --version', 'print the package, sidecar and protocol versions')
    .addHelpText('after', `${EXIT_HELP}\n\nRun \`rfdetr <command> --help\` for a command's options.`);
  program.addCommand(detectCommand(ctx));
  program.addCommand(serveCommand(ctx));
  program.addCommand(smokeCommand(ctx));
  program.addCommand(infoCommand(ctx));
  program.addCommand(benchCommand(ctx));
  program.addCommand(verifyCommand(ctx));
  program.addCommand(trackCommand(ctx));
  program.addCommand(weightsCommand({ out: (s) => void ctx.stdout.write(s), err: (s) => void ctx.stderr.write(s), progress: ctx.stderr, env: ctx.env }));
  return wire(program, ctx);
}

/** Runs the CLI; resolves with the exit status (0 ok, 1 runtime error, 2 usage error). Never exits itself. */
export async function runCli(argv: readonly string[], ctx: CliContext): Promise<number> {
  if (argv[0] === '-V' || argv[0] === '--version') {
    ctx.stdout.write(`${await versionText(ctx.env)}\n`);
    return 0;
  }
  const program = buildProgram(ctx);
  try {
    await program.parseAsync(argv, { from: 'user' });
    return 0;
  } catch (e) {
    if (e instanceof CommanderError) return exitCodeFor(e); // commander already printed its message
    if (e instanceof SmokeFailure) {
      ctx.stdout.write(`FAIL ${e.message}\n`);
      return 1;
    }
    const code = exitCodeFor(e);
    if (e instanceof ImagesFailedError || e instanceof VerifyFailure) ctx.stderr.write(`${e.message}\n`);
    else if (e instanceof RfdetrError) ctx.stderr.write(`rfdetr: ${e.message}${code === 2 ? '\n(see --help for the options)' : ''}\n`);
    else ctx.stderr.write(`rfdetr: ${(e as Error)?.message ?? String(e)}\n`);
    if (ctx.env.RFDETR_DEBUG && e instanceof Error && e.stack) ctx.stderr.write(`${e.stack}\n`);
    return code;
  }
}
