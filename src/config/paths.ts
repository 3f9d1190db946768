// Where the package's own files live, resolved from this module so it works from a clone, an npm install and the
// container, run from the TypeScript sources or from their compiled JavaScript (compiled/src/config/paths.js).
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

/** The nearest directory above this module that holds package.json. */
function findPackageRoot(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  while (!fs.existsSync(path.join(dir, 'package.json'))) {
    const up = path.dirname(dir);
    if (up === dir) throw new Error(`no package.json above ${fileURLToPath(import.meta.url)}: the package is incomplete`);
    dir = up;
  }
  return dir;
}

export const packageRoot = findPackageRoot();

/** The sidecar executable: RFDETR_SIDECAR overrides the build output of `npm install`. */
export function sidecarBinary(env: NodeJS.ProcessEnv = process.env): string {
  return env.RFDETR_SIDECAR || path.join(packageRoot, 'sidecar', 'build', 'rfdetr-sidecar');
}

/** The synthetic-checkpoint generator executable (built with the sidecar). */
export function synthBinary(env: NodeJS.ProcessEnv = process.env): string {
  return env.RFDETR_SYNTH || path.join(packageRoot, 'sidecar', 'build', 'rfdetr-synth');
}

/** The held-order accuracy tool (`rfdetr verify --engine cpu --precision P` runs it; built with the sidecar). */
export function accuracyBinary(env: NodeJS.ProcessEnv = process.env): string {
  return env.RFDETR_ACCURACY || path.join(packageRoot, 'sidecar', 'build', 'rfdetr-accuracy');
}

/** The checkpoint schemas (one rfdetr-<variant>.json per variant, the transformers key map), shared with the C++ loader. */
export const schemaDir = path.join(packageRoot, 'sidecar', 'schema');

/** RF-DETR-base's schema (487 tensors, shapes, synth rules): the default variant. */
export const schemaPath = path.join(schemaDir, 'rfdetr-base.json');

/** The COCO-91 config.json (id2label) written next to synthetic checkpoints. */
export const cocoConfigPath = path.join(packageRoot, 'sidecar', 'schema', 'coco-config.json');

/** The project's own test fixtures (small goldens, fixture images, golden protocol frames). */
export const testFixturesDir = path.join(packageRoot, 'test', 'fixtures');

/** The image `rfdetr smoke` and `rfdetr bench` use when given none (fixture case 1, 640x480). */
export const defaultSmokeImage = path.join(testFixturesDir, 'rfdetr-synth', 'case-1', 'input.png');

/** The family fixtures (nano/, small/, medium/, large/: case-1 each, made by upstream at seed 1), beside the clone. */
export function familyFixturesDir(env: NodeJS.ProcessEnv = process.env): string {
  return env.RFDETR_FAMILY_FIXTURES || path.resolve(packageRoot, '..', 'shared', 'fixtures', 'rfdetr-family');
}

/** The shared fixture tree (large per-stage tensors); present beside the clone in CI and on developer machines. */
export function sharedFixturesDir(env: NodeJS.ProcessEnv = process.env): string {
  return env.RFDETR_SHARED_FIXTURES || path.resolve(packageRoot, '..', 'shared', 'fixtures', 'rfdetr-synth');
}
