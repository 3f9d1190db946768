// The failures a command reports itself before exiting 1 (program.ts prints them as they are), and the exit
// statuses every command's --help lists: light, so that the program can tell them apart without loading the
// commands' work.

export const EXIT_HELP = [
  '',
  'Exit status:',
  '  0  success',
  '  1  runtime error (missing or unreadable input, no weights, engine or server failure, smoke/verify FAIL)',
  '  2  usage error (unknown flag, malformed or out-of-range value)',
].join('\n');

/** detect: the run ended with some inputs failed (each already reported). */
export class ImagesFailedError extends Error {
  override name = 'ImagesFailedError';
}

/** smoke: printed as `FAIL <message>` on stdout. */
export class SmokeFailure extends Error {
  override name = 'SmokeFailure';
}

/** verify ran and the engine is below the gate. */
export class VerifyFailure extends Error {
  override name = 'VerifyFailure';
}
