// Where the ffmpeg and ffprobe programs are, and the one error for their absence. Video needs Debian's
// `ffmpeg` package (a system dependency like the compiler); still images never touch this module, so they
// keep working without it. RFDETR_FFMPEG / RFDETR_FFPROBE name other executables.
import { execFile } from 'node:child_process';
import { RfdetrError } from '../errors.ts';

export interface FfmpegPrograms {
  ffmpeg: string;
  ffprobe: string;
}

export function ffmpegPrograms(env: NodeJS.ProcessEnv = process.env): FfmpegPrograms {
  return { ffmpeg: env.RFDETR_FFMPEG || 'ffmpeg', ffprobe: env.RFDETR_FFPROBE || 'ffprobe' };
}

/** The error for a spawn that found no executable: names the program, the Debian package and the command. */
export function ffmpegMissing(program: string, cause?: unknown): RfdetrError {
  return new RfdetrError(
    'E_FFMPEG_MISSING',
    `video needs the ${program} program, which was not found (${program === 'ffmpeg' || program === 'ffprobe' ? 'not on PATH' : `${program} does not exist`}); install Debian's ffmpeg package (sudo apt-get install -y ffmpeg) or set RFDETR_FFMPEG/RFDETR_FFPROBE to the executables. Still images do not need it`,
    { program },
    { cause },
  );
}

/** Whether a spawn error means the executable is not there. */
export function isMissingExecutable(e: unknown): boolean {
  const err = e as { code?: unknown; errno?: unknown };
  return err?.code === 'ENOENT' || err?.code === 'EACCES';
}

/** `ffmpeg -version`'s first line ("ffmpeg version 5.1.6-0+deb12u1 …"), or null when there is no ffmpeg. */
export function ffmpegVersion(env: NodeJS.ProcessEnv = process.env): Promise<string | null> {
  const { ffmpeg } = ffmpegPrograms(env);
  return new Promise((resolve) => {
    execFile(ffmpeg, ['-hide_banner', '-version'], { timeout: 10_000 }, (err, stdout) => {
      if (err) return resolve(null);
      resolve(String(stdout).split('\n')[0]?.trim() || null);
    });
  });
}
