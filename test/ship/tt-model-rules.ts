// tt-model's rules for an authored tt-model.yaml (schema 5.1), re-expressed from what its loader applies
// (tenstorrent/tt-model-manager src/tt_kernel: container_manifest.py load_container_manifest, the field sets of
// manifest.py ServeSettings/ServeProfile, launchers.py's kinds). validateManifest returns every violation as a
// message; an empty list is a manifest that loader accepts, as far as it can be judged without its tt-metal tree.
type Doc = Record<string, unknown>;

export const SCHEMA = '5.1';
export const ARCHES = ['blackhole', 'wormhole_b0'];

// Per kind: the runtime keys it understands, the serve fields a profile must carry, and the log line it waits for.
export const KINDS: Record<string, { runtime: string[]; required: string[]; readyLine: string }> = {
  'vllm-plugin': { runtime: ['vllm', 'plugin', 'extension', 'extra_models_dir', 'lock', 'overrides', 'wheels'], required: ['hardware', 'mesh_device', 'max_num_seqs', 'block_size'], readyLine: 'Application startup complete' },
  'vllm-fork': { runtime: ['vllm', 'extension', 'lock', 'model_dir'], required: ['hardware', 'mesh_device', 'max_num_seqs', 'block_size'], readyLine: 'Server ready at' },
  'tt-dit-server': { runtime: ['app', 'packages', 'lock', 'mesh_shape_env'], required: ['hardware', 'mesh_device'], readyLine: 'Application startup complete' },
};

// Closed field sets (the loader forbids any other key), with the required ones.
const TOP = { allowed: ['schema', 'repo', 'name', 'weights', 'kind', 'arch', 'source', 'image', 'runtime', 'serve', 'serve_profiles', 'default_profile', 'card', 'verify'], required: ['repo', 'name', 'weights', 'arch', 'source'] };
const WEIGHTS = { allowed: ['repo', 'revision', 'allow_patterns', 'ignore_patterns'], required: ['repo'] };
const SOURCE = { allowed: ['tt_metal', 'code', 'extra_code', 'ubuntu', 'python'], required: ['tt_metal', 'code', 'ubuntu', 'python'] };
const GIT = { allowed: ['repo', 'ref', 'sha'], required: ['repo', 'ref'] };
const EXTRA_CODE = { allowed: ['root', 'paths'], required: ['root', 'paths'] };
const IMAGE = { allowed: ['registry', 'repository'], required: [] };
const CARD = { allowed: ['description', 'quickstart'], required: [] };
const SERVE_FIELDS = ['hardware', 'mesh_device', 'port', 'max_model_len', 'max_num_seqs', 'block_size', 'server_timeout', 'capabilities', 'additional_config', 'args', 'env'];
const SERVE = { allowed: SERVE_FIELDS, required: [] };
const PROFILE = { allowed: [...SERVE_FIELDS, 'name', 'description'], required: ['name'] };
const CAPABILITIES = { allowed: ['tool_parser', 'reasoning_parser'], required: [] };

// The plugin's MESH_DEVICE table and chips per board (a hardware label names boards: <board>[xN]).
export const MESH_PRESETS: Record<string, [number, number]> = {
  N150: [1, 1], P100: [1, 1], P150: [1, 1], P150x2: [1, 2], N300: [1, 2], P300: [1, 2], N150x4: [1, 4], P150x4: [1, 4],
  T3K: [1, 8], P150x8: [1, 8], P300x2: [1, 4], QB2: [2, 2], TG: [4, 8], 'BH-Galaxy': [4, 8],
};
const BOARD_CHIPS: Record<string, number> = { p100: 1, p150: 1, n150: 1, e150: 1, p300: 2, n300: 2 };

export function hardwareChips(label: string): number | undefined {
  const m = /^([a-z]\d+[a-z]?)(?:x(\d+))?$/.exec(label.trim().toLowerCase());
  if (!m) return undefined;
  const per = BOARD_CHIPS[m[1]!] ?? BOARD_CHIPS[m[1]!.replace(/[a-z]$/, '')];
  return per === undefined ? undefined : per * Number(m[2] ?? 1);
}

export function meshShape(value: string): [number, number] | undefined {
  const t = /^\s*[([]\s*(\d+)\s*,\s*(\d+)\s*[)\]]\s*$/.exec(value);
  if (t) return [Number(t[1]), Number(t[2])];
  return MESH_PRESETS[value];
}

const isMap = (v: unknown): v is Doc => typeof v === 'object' && v !== null && !Array.isArray(v);
const isStrList = (v: unknown): v is string[] => Array.isArray(v) && v.every((x) => typeof x === 'string');
const escapes = (p: string) => p.startsWith('/') || p.split('/').includes('..');

function closed(where: string, v: unknown, set: { allowed: string[]; required: string[] }, errors: string[]): v is Doc {
  if (!isMap(v)) {
    errors.push(`${where}: expected a mapping`);
    return false;
  }
  for (const k of Object.keys(v)) if (!set.allowed.includes(k)) errors.push(`${where}.${k}: extra field not permitted (allowed: ${set.allowed.join(', ')})`);
  for (const k of set.required) if (v[k] === undefined || v[k] === null) errors.push(`${where}.${k}: field required`);
  return true;
}

function gitOrPath(where: string, v: unknown, errors: string[]): void {
  if (typeof v === 'string') return;
  closed(where, v, GIT, errors);
}

export function validateManifest(d: unknown): string[] {
  const errors: string[] = [];
  if (!closed('tt-model.yaml', d, TOP, errors)) return errors;

  if ((d.schema ?? SCHEMA) !== SCHEMA) errors.push(`schema: unsupported ${JSON.stringify(d.schema)} (a string "${SCHEMA}")`);
  if (!ARCHES.includes(String(d.arch))) errors.push(`arch must be one of ${ARCHES.join(', ')}, got ${JSON.stringify(d.arch)}`);
  const kindName = String(d.kind ?? 'vllm-plugin');
  const kind = KINDS[kindName];
  if (!kind) errors.push(`kind must be one of ${Object.keys(KINDS).sort().join(', ')}, got '${kindName}' (unsupported kind)`);
  if (typeof d.repo !== 'string' || !d.repo.includes('/')) errors.push(`repo must be a namespaced HF id (org/name), got ${JSON.stringify(d.repo)}`);
  if (typeof d.name !== 'string' || !/^[a-z0-9][a-z0-9._-]*$/.test(d.name)) errors.push(`name ${JSON.stringify(d.name)} is not a safe slug`);

  const weightsRepo = typeof d.weights === 'string' ? d.weights : isMap(d.weights) ? d.weights.repo : undefined;
  if (isMap(d.weights)) closed('weights', d.weights, WEIGHTS, errors);
  if (typeof weightsRepo !== 'string' || !weightsRepo.includes('/')) errors.push(`weights must name a namespaced HF id, got ${JSON.stringify(weightsRepo)}`);

  // source: the allowlist decides what enters the image.
  const shipped: string[] = [];
  if (closed('source', d.source, SOURCE, errors)) {
    gitOrPath('source.tt_metal', d.source.tt_metal, errors);
    if (!isStrList(d.source.code) || d.source.code.length === 0) errors.push('source.code: a non-empty list of paths in the tt-metal tree');
    else for (const p of d.source.code) escapes(p) ? errors.push(`source.code paths must be relative to the tt-metal tree: ${p}`) : shipped.push(p);
    const extra = d.source.extra_code ?? [];
    if (!Array.isArray(extra)) errors.push('source.extra_code: a list of {root, paths}');
    else extra.forEach((e: unknown, i: number) => {
      if (!closed(`source.extra_code[${i}]`, e, EXTRA_CODE, errors)) return;
      gitOrPath(`source.extra_code[${i}].root`, e.root, errors);
      if (!isStrList(e.paths) || e.paths.length === 0) errors.push(`source.extra_code[${i}].paths: at least one path`);
      else for (const p of e.paths) escapes(p) ? errors.push(`source.extra_code[${i}] paths must be relative to their root: ${p}`) : shipped.push(p);
    });
    for (const k of ['ubuntu', 'python']) if (d.source[k] !== undefined && typeof d.source[k] !== 'string') errors.push(`source.${k}: a string (quote it: "24.04")`);
  }
  if (d.image !== undefined) closed('image', d.image, IMAGE, errors);
  if (d.card !== undefined && d.card !== null) closed('card', d.card, CARD, errors);
  if (d.verify !== undefined && !isStrList(d.verify)) errors.push('verify: a list of Python statements (strings)');

  // serve, profiles, and hardware ↔ mesh agreement per merged profile.
  const serve = d.serve ?? {};
  closed('serve', serve, SERVE, errors);
  const profiles = Array.isArray(d.serve_profiles) ? d.serve_profiles : [];
  profiles.forEach((p: unknown, i: number) => closed(`serve_profiles[${i}]`, p, PROFILE, errors));
  for (const [where, s] of [['serve', serve], ...profiles.map((p, i) => [`serve_profiles[${i}]`, p] as const)] as [string, unknown][]) {
    if (isMap(s) && s.capabilities !== undefined) closed(`${where}.capabilities`, s.capabilities, CAPABILITIES, errors);
    if (isMap(s) && s.env !== undefined && !(isMap(s.env) && Object.values(s.env).every((v) => typeof v === 'string'))) errors.push(`${where}.env: string values only (quote numbers)`);
  }
  const names = profiles.map((p) => (isMap(p) ? String(p.name) : ''));
  if (names.length > 1 && !d.default_profile) errors.push('a manifest with several serve profiles must name default_profile');
  if (d.default_profile && !names.includes(String(d.default_profile))) errors.push(`default_profile ${JSON.stringify(d.default_profile)} names no profile`);
  const merged = (profiles.length ? profiles : [{ name: 'default' }]).map((p) => ({ ...(isMap(serve) ? serve : {}), ...(isMap(p) ? p : {}) }) as Doc);
  for (const m of merged) {
    const where = `serve profile '${String(m.name ?? 'default')}'`;
    for (const f of kind?.required ?? []) if (m[f] === undefined || m[f] === null) errors.push(`${where}: ${f} is required`);
    if (typeof m.mesh_device !== 'string' || typeof m.hardware !== 'string') continue;
    const mesh = meshShape(m.mesh_device);
    const chips = hardwareChips(m.hardware);
    if (!mesh) errors.push(`${where}: invalid mesh_device '${m.mesh_device}' (not in the plugin's MESH_DEVICE table)`);
    if (chips === undefined || chips < 1) errors.push(`${where}: hardware '${m.hardware}' is not a board label (<board>[xN])`);
    if (mesh && chips !== undefined && mesh[0] * mesh[1] !== chips) errors.push(`${where}: mesh_device '${m.mesh_device}' opens ${mesh[0] * mesh[1]} chips but hardware '${m.hardware}' implies ${chips}`);
  }

  // runtime: the kind's own keys and rules.
  const rt = d.runtime ?? {};
  if (!isMap(rt)) errors.push('runtime: expected a mapping');
  else if (!kind) {
    // The loader stops at the kind; name the runtime keys no kind has too, so one run shows every problem.
    const any = new Set(Object.values(KINDS).flatMap((k) => k.runtime));
    for (const k of Object.keys(rt)) if (!any.has(k)) errors.push(`runtime key '${k}' is not a key of any kind`);
  } else {
    for (const k of Object.keys(rt)) if (!kind.runtime.includes(k)) errors.push(`runtime key '${k}' is not valid for kind ${kindName}; allowed: ${kind.runtime.join(', ')}`);
    if (kindName === 'tt-dit-server') {
      const app = rt.app;
      if (typeof app !== 'string' || !app.includes(':')) errors.push(`kind tt-dit-server requires runtime.app as "module.path:attribute", got ${JSON.stringify(app)}`);
      else {
        const top = app.split(':')[0]!.split('.')[0]!;
        if (!shipped.some((c) => c.split('/')[0] === top)) errors.push(`runtime.app '${app}' lives under '${top}', which no allowlist entry ships (source.code / source.extra_code)`);
      }
      if (rt.mesh_shape_env !== undefined && !(typeof rt.mesh_shape_env === 'string' && /^[A-Za-z_][A-Za-z0-9_]*$/.test(rt.mesh_shape_env))) errors.push(`runtime.mesh_shape_env ${JSON.stringify(rt.mesh_shape_env)} is not an environment variable name`);
      if (rt.packages !== undefined && !isStrList(rt.packages)) errors.push('runtime.packages: a list of requirement strings');
    }
  }
  return errors;
}
