// The `rfdetr` entry (bin/rfdetr.js runs it through tsx): the real process as the CLI's context.
import { openSidecarBackend } from './backend.ts';
import { readStreamCapped } from './inputs.ts';
import { runCli } from './program.ts';

const readStdin = () => readStreamCapped(process.stdin);

// `rfdetr detect --json … | head -1`: a reader that goes away is not an error; stop quietly.
process.stdout.on('error', (e: NodeJS.ErrnoException) => {
  if (e.code === 'EPIPE') process.exit(process.exitCode ?? 0);
  throw e;
});

process.exitCode = await runCli(process.argv.slice(2), {
  stdout: process.stdout,
  stderr: process.stderr,
  readStdin,
  stdin: process.stdin,
  env: process.env,
  cwd: process.cwd(),
  openBackend: openSidecarBackend,
});
// A pipe on stdin that was read only in part (a video that failed, --max-frames) would keep the process alive.
process.stdin.destroy();
