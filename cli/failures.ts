// The failures a command reports itself before exiting 1 (program.ts prints them as they are): light, so that
// the program can tell them apart without loading the commands' work.

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
