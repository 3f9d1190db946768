// The default BackendFactory: the supervised sidecar from src/sidecar (spawned, CPU engine by default), or a
// connection to an external one (`--sidecar-socket`).
import fs from 'node:fs';
import { sidecarBinary } from '../src/config/paths.ts';
import { RfdetrError } from '../src/errors.ts';
import type { BackendFactory } from './context.ts';

export const openSidecarBackend: BackendFactory = async (req) => {
  const bin = sidecarBinary();
  if (!req.socketPath && !fs.existsSync(bin)) {
    throw new RfdetrError('E_SIDECAR_FAILED', `the sidecar executable ${bin} does not exist: build it with \`npm run build:sidecar\` (or set RFDETR_SIDECAR)`);
  }
  throw new RfdetrError('E_SIDECAR_FAILED', `cannot start engine '${req.engine}': this build has no sidecar client (src/sidecar supervisor, branch sidecar, not merged yet); use --url to talk to a running server`);
};
