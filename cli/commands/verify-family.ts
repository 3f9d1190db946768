// `rfdetr verify --engine cpu --precision P --family`: the held-order check (verify-held.ts) on the family
// fixtures too (../shared/fixtures/rfdetr-family: nano, small, medium, large, case-1 each), each on its own
// seed-1 synthetic checkpoint generated into a temporary directory (the checkpoint its golden was made with).
// LargeDeprecated is left out: its two-level projector is not one the cpu engine runs.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { familyFixturesDir } from '../../src/config/paths.ts';
import { RfdetrError } from '../../src/errors.ts';
import { runSynth } from '../../src/weights/synth.ts';
import { runHeldOrder, type HeldCase } from './verify-held.ts';

const VARIANTS = ['nano', 'small', 'medium', 'large'];

/** The family variants with a case-1 golden under the fixture directory; a usage error naming it when none. */
export function familyVariants(env: NodeJS.ProcessEnv): { dir: string; variants: string[] } {
  const dir = familyFixturesDir(env);
  const variants = VARIANTS.filter((v) => fs.existsSync(path.join(dir, v, 'case-1', 'golden.safetensors')));
  if (variants.length === 0) {
    throw new RfdetrError('E_USAGE', `--family: no family fixtures in ${dir} (expected ${VARIANTS.map((v) => `${v}/case-1/golden.safetensors`).join(', ')}); set RFDETR_FAMILY_FIXTURES to the rfdetr-family fixture directory, or leave --family out`);
  }
  return { dir, variants };
}

/** Each variant's held-order cases, named VARIANT/CASE. */
export async function runFamily(env: NodeJS.ProcessEnv, o: { precision: string; threads?: number | undefined; log: (line: string) => void }): Promise<HeldCase[]> {
  const { dir, variants } = familyVariants(env);
  const out: HeldCase[] = [];
  for (const variant of variants) {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), `rfdetr-verify-${variant}-`));
    try {
      o.log(`verify: ${variant}: the seed-1 synthetic checkpoint, then cpu ${o.precision} against fp32 with fp32's proposal order held`);
      const s = await runSynth({ seed: 1n, variant, out: tmp, env });
      const rep = await runHeldOrder(env, { weightsDir: s.dir, precision: o.precision, fixturesDir: path.join(dir, variant), threads: o.threads });
      for (const c of rep.cases) out.push({ ...c, case: `${variant}/${c.case}` });
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  }
  return out;
}
