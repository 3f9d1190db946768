// Finds the checkpoint directory (model.safetensors + config.json). First step that applies wins; every step
// tried is logged and kept in `chain`, so /info and `rfdetr weights where` can show how the answer was reached:
//   1. --weights DIR (flag) or TT_RF_DETR_WEIGHTS=DIR (env): an explicit directory; a missing file is an error.
//   2. HF_MODEL naming a directory (tt-model serve rewrites HF_MODEL to …/models--ORG--NAME/snapshots/<sha>).
//   3. The Hub cache: models--ORG--NAME/snapshots/<commit>/, a branch resolved through refs/<branch>.
//   4. A download from the Hub into that cache (skipped with HF_HUB_OFFLINE=1).
// Repo: --model, else HF_MODEL (when a repo id), else Roboflow/rf-detr-base. Revision: --revision, else
// TT_WEIGHTS_REVISION, else TT_MODEL_WEIGHTS_REVISION, else the pinned sha (for the default repo) or main.
import path from 'node:path';
import { RfdetrError } from '../errors.ts';
import {
  CONFIG_FILE, DEFAULT_ENDPOINT, DEFAULT_REPO, DEFAULT_REVISION, MODEL_FILE, WEIGHT_FILES,
  cachedCommit, hubCacheDir, hubOffline, isCommitSha, isDirectory, isFile, parseSnapshotDir, repoCacheDir,
  validateRepoId, validateRevision, writeRef,
} from './hub-cache.ts';
import { HubClient, hubFailureOf, type ProgressStream } from './hub-download.ts';
import { syntheticMark } from './synthetic.ts';

export type WeightsSource = 'env' | 'flag' | 'hf_model_dir' | 'cache' | 'download';

export interface ResolvedWeights {
  /** The directory holding both files (for the Hub cache: the snapshot directory). */
  dir: string;
  /** The Hub repo the files belong to; null for a plain directory of unknown origin. */
  repo: string | null;
  /** The revision asked for (sha, branch or tag); null for a plain directory. */
  revision: string | null;
  /** The commit sha the files are from, when known. */
  commit: string | null;
  files: { model: string; config: string };
  source: WeightsSource;
  /** Every step tried, in order, with its outcome; the last entry is the winner. */
  chain: string[];
  /** The files say they were made by rfdetr-synth: they load and run, but their detections are meaningless. */
  synthetic: boolean;
  /** The generator seed of a synthetic checkpoint ("0x1"), when the files name it; null otherwise. */
  syntheticSeed: string | null;
}

/** What the resolution steps find; resolveWeights adds the synthetic mark read from the files. */
type Found = Omit<ResolvedWeights, 'synthetic' | 'syntheticSeed'>;

export interface ResolveWeightsOptions {
  /** Defaults to process.env. */
  env?: NodeJS.ProcessEnv;
  /** --weights DIR */
  weightsDir?: string | undefined;
  /** --model REPO */
  model?: string | undefined;
  /** --revision SHA|BRANCH */
  revision?: string | undefined;
  /** Allow step 4 (default true). `where` and `verify` pass false: they never download. */
  download?: boolean;
  /** Skip steps 1-2 (`fetch` fills the Hub cache whatever else is configured). */
  hubOnly?: boolean;
  /**
   * For a branch or tag: ask the Hub which commit it names now (downloading what changed) instead of trusting
   * refs/<branch>; an unreachable Hub or HF_HUB_OFFLINE then falls back to the cached ref. A commit sha is
   * immutable and never re-checked.
   */
  refresh?: boolean;
  /** One line per step (default: nothing). */
  log?: (line: string) => void;
  /** Progress bar target (drawn only on a TTY), normally process.stderr. */
  progress?: ProgressStream | null;
  /** HTTP timeout in ms (connect, headers, body idle). */
  timeoutMs?: number;
  signal?: AbortSignal;
}

export interface WeightsRequest {
  repo: string;
  repoFrom: string;
  revision: string;
  revisionFrom: string;
}

/** The repo and revision the options and environment ask for (flags beat env beat defaults). */
export function weightsRequest(opts: Pick<ResolveWeightsOptions, 'env' | 'model' | 'revision'>): WeightsRequest {
  const env = opts.env ?? process.env;
  let repo = DEFAULT_REPO;
  let repoFrom = 'default';
  if (opts.model !== undefined) {
    repo = validateRepoId(opts.model, '--model');
    repoFrom = '--model';
  } else if (env.HF_MODEL && !isDirectory(env.HF_MODEL) && !looksLikePath(env.HF_MODEL)) {
    repo = validateRepoId(env.HF_MODEL, 'HF_MODEL');
    repoFrom = 'HF_MODEL';
  } else if (env.HF_MODEL && isDirectory(env.HF_MODEL)) {
    const snap = parseSnapshotDir(env.HF_MODEL);
    if (snap) {
      repo = snap.repo;
      repoFrom = 'HF_MODEL snapshot path';
    }
  }
  let revision: string;
  let revisionFrom: string;
  if (opts.revision !== undefined) {
    revision = validateRevision(opts.revision, '--revision');
    revisionFrom = '--revision';
  } else if (env.TT_WEIGHTS_REVISION) {
    revision = validateRevision(env.TT_WEIGHTS_REVISION, 'TT_WEIGHTS_REVISION');
    revisionFrom = 'TT_WEIGHTS_REVISION';
  } else if (env.TT_MODEL_WEIGHTS_REVISION) {
    revision = validateRevision(env.TT_MODEL_WEIGHTS_REVISION, 'TT_MODEL_WEIGHTS_REVISION');
    revisionFrom = 'TT_MODEL_WEIGHTS_REVISION';
  } else if (repo === DEFAULT_REPO) {
    revision = DEFAULT_REVISION;
    revisionFrom = 'pinned';
  } else {
    revision = 'main';
    revisionFrom = 'default branch (no pin for a non-default repo)';
  }
  return { repo, repoFrom, revision, revisionFrom };
}

function looksLikePath(v: string): boolean {
  return v.startsWith('/') || v.startsWith('.') || v.startsWith('~') || v.split('/').length > 2;
}

function filesIn(dir: string): { model: string; config: string } {
  return { model: path.join(dir, MODEL_FILE), config: path.join(dir, CONFIG_FILE) };
}

function missingIn(dir: string): string[] {
  return WEIGHT_FILES.filter((f) => !isFile(path.join(dir, f)));
}

const FIXES = (req: WeightsRequest) => [
  `download them: rfdetr weights fetch${req.repo !== DEFAULT_REPO ? ` --model ${req.repo}` : ''}${req.revisionFrom !== 'pinned' ? ` --revision ${req.revision}` : ''}`,
  'or point at a directory holding model.safetensors + config.json: --weights DIR (or TT_RF_DETR_WEIGHTS=DIR)',
  'or, for a demo without the real weights, make a synthetic checkpoint: rfdetr weights synth --seed 1 --out DIR (its detections are meaningless)',
];

function notFound(what: string, chain: string[], req: WeightsRequest | null, extra: Record<string, unknown> = {}): RfdetrError {
  const lines = [what, 'Tried:', ...chain.map((c) => `  - ${c}`)];
  if (req) lines.push('To fix:', ...FIXES(req).map((f) => `  - ${f}`));
  return new RfdetrError('E_WEIGHTS_NOT_FOUND', lines.join('\n'), { chain, ...extra });
}

/** Resolves the checkpoint directory; throws E_WEIGHTS_NOT_FOUND (what was tried + how to fix), E_HUB or E_USAGE. */
export async function resolveWeights(opts: ResolveWeightsOptions = {}): Promise<ResolvedWeights> {
  const found = await find(opts);
  const mark = syntheticMark(found.files);
  return { ...found, synthetic: mark.synthetic, syntheticSeed: mark.seed };
}

async function find(opts: ResolveWeightsOptions): Promise<Found> {
  const env = opts.env ?? process.env;
  const log = opts.log ?? (() => {});
  const chain: string[] = [];
  const step = (line: string) => {
    chain.push(line);
    log(`weights: ${line}`);
  };

  // 1. An explicit directory.
  if (opts.hubOnly) {
    step('--weights / TT_RF_DETR_WEIGHTS / HF_MODEL directory: not consulted (fetch fills the Hub cache)');
  } else {
    const explicit = opts.weightsDir !== undefined
      ? { dir: opts.weightsDir, name: '--weights', source: 'flag' as const }
      : env.TT_RF_DETR_WEIGHTS ? { dir: env.TT_RF_DETR_WEIGHTS, name: 'TT_RF_DETR_WEIGHTS', source: 'env' as const } : null;
    if (opts.weightsDir !== undefined && env.TT_RF_DETR_WEIGHTS) step(`TT_RF_DETR_WEIGHTS=${env.TT_RF_DETR_WEIGHTS}: ignored, --weights given`);
    if (explicit) {
      const dir = path.resolve(explicit.dir);
      if (!isDirectory(dir)) {
        step(`${explicit.name} ${dir}: not a directory`);
        throw new RfdetrError('E_WEIGHTS_NOT_FOUND', `${explicit.name} names ${dir}, which is not a directory. Expected a directory holding ${MODEL_FILE} and ${CONFIG_FILE}; fix the path, or unset it to use the Hub cache (rfdetr weights fetch)`, { chain });
      }
      const missing = missingIn(dir);
      if (missing.length > 0) {
        step(`${explicit.name} ${dir}: missing ${missing.join(', ')}`);
        throw new RfdetrError('E_WEIGHTS_NOT_FOUND', `${explicit.name} directory ${dir} has no ${missing.join(' and no ')} (expected ${MODEL_FILE} and ${CONFIG_FILE}). Put the missing file there, point ${explicit.name} at a complete directory, or unset it to use the Hub cache (rfdetr weights fetch)`, { chain, missing });
      }
      step(`${explicit.name} ${dir}: found ${MODEL_FILE} and ${CONFIG_FILE} (winner)`);
      const snap = parseSnapshotDir(dir);
      return { dir, repo: snap?.repo ?? null, revision: null, commit: snap?.commit ?? null, files: filesIn(dir), source: explicit.source, chain };
    }
    step('TT_RF_DETR_WEIGHTS: not set (no --weights)');

    // 2. HF_MODEL as a directory.
    if (env.HF_MODEL && opts.model !== undefined) {
      step(`HF_MODEL=${env.HF_MODEL}: ignored, --model given`);
    } else if (env.HF_MODEL && isDirectory(env.HF_MODEL)) {
      const dir = path.resolve(env.HF_MODEL);
      const missing = missingIn(dir);
      if (missing.length > 0) {
        step(`HF_MODEL directory ${dir}: missing ${missing.join(', ')}`);
        throw new RfdetrError('E_WEIGHTS_NOT_FOUND', `HF_MODEL names the directory ${dir}, which has no ${missing.join(' and no ')} (expected ${MODEL_FILE} and ${CONFIG_FILE}). Fix the directory, or set HF_MODEL to a repo id such as ${DEFAULT_REPO} to use the Hub cache`, { chain, missing });
      }
      const snap = parseSnapshotDir(dir);
      step(`HF_MODEL directory ${dir}: found ${MODEL_FILE} and ${CONFIG_FILE} (winner)`);
      return { dir, repo: snap?.repo ?? null, revision: snap?.commit ?? null, commit: snap?.commit ?? null, files: filesIn(dir), source: 'hf_model_dir', chain };
    } else if (env.HF_MODEL && looksLikePath(env.HF_MODEL)) {
      step(`HF_MODEL=${env.HF_MODEL}: looks like a path but is not a directory`);
      throw new RfdetrError('E_WEIGHTS_NOT_FOUND', `HF_MODEL=${env.HF_MODEL} is not a directory and not a Hub repo id. Expected a snapshot directory holding ${MODEL_FILE} and ${CONFIG_FILE}, or a repo id such as ${DEFAULT_REPO}`, { chain });
    } else {
      step(env.HF_MODEL ? `HF_MODEL=${env.HF_MODEL}: a repo id, not a directory` : 'HF_MODEL: not set');
    }
  }

  const req = weightsRequest(opts);
  const { dir: cacheDir, from: cacheFrom } = hubCacheDir(env);
  const repoDir = repoCacheDir(cacheDir, req.repo);
  const revDesc = `${req.repo}@${req.revision} (repo from ${req.repoFrom}, revision from ${req.revisionFrom})`;

  // 3. The Hub cache.
  const cached = cachedCommit(repoDir, req.revision);
  let cacheHit: Found | null = null;
  if (cached.commit === null) {
    step(`Hub cache ${cacheDir} (${cacheFrom}) for ${revDesc}: ${cached.refPath} not found`);
  } else {
    const snapDir = path.join(repoDir, 'snapshots', cached.commit);
    const missing = missingIn(snapDir);
    const via = cached.refPath ? ` via ${cached.refPath}` : '';
    if (missing.length > 0) {
      step(`Hub cache ${snapDir}${via} (${cacheFrom}): missing ${missing.join(', ')}`);
    } else {
      cacheHit = { dir: snapDir, repo: req.repo, revision: req.revision, commit: cached.commit, files: filesIn(snapDir), source: 'cache', chain };
      const recheck = opts.refresh && !isCommitSha(req.revision);
      step(`Hub cache ${snapDir}${via} (${cacheFrom}): found ${MODEL_FILE} and ${CONFIG_FILE}${recheck ? `; asking the Hub what '${req.revision}' names now` : ' (winner)'}`);
      if (!recheck) return cacheHit;
    }
  }

  // 4. Download.
  const endpoint = env.HF_ENDPOINT || DEFAULT_ENDPOINT;
  if (opts.download === false) {
    step(`download from ${endpoint}: not attempted (this command does not download; rfdetr weights fetch does)`);
    if (cacheHit) return winner(cacheHit, step);
    throw notFound(`No weights found for ${req.repo}@${req.revision}.`, chain, req, { repo: req.repo, revision: req.revision });
  }
  if (hubOffline(env)) {
    step(`download from ${endpoint}: skipped, HF_HUB_OFFLINE=${env.HF_HUB_OFFLINE}`);
    if (cacheHit) return winner(cacheHit, step);
    throw notFound(`No weights for ${req.repo}@${req.revision} in the Hub cache ${cacheDir}, and HF_HUB_OFFLINE=${env.HF_HUB_OFFLINE} forbids downloading.`, chain, req, { repo: req.repo, revision: req.revision });
  }
  const client = new HubClient({ endpoint, token: env.HF_TOKEN || undefined, log, progress: opts.progress, timeoutMs: opts.timeoutMs, env, signal: opts.signal });
  try {
    const first = await client.metadata(req.repo, req.revision, MODEL_FILE);
    if (isCommitSha(req.revision) && first.commit !== req.revision) {
      throw new RfdetrError('E_HUB', `asked ${endpoint} for ${req.repo} at commit ${req.revision} but it answered with commit ${first.commit} (X-Repo-Commit); refusing files that are not the pinned ones`, { url: first.url });
    }
    const commit = first.commit;
    for (const file of WEIGHT_FILES) {
      const pointer = path.join(repoDir, 'snapshots', commit, file);
      if (isFile(pointer)) {
        step(`download ${file}: already in the cache at ${pointer}`);
        continue;
      }
      // Later files are asked for at the commit the first one resolved to, so a branch moving mid-way cannot mix commits.
      const meta = file === MODEL_FILE ? first : await client.metadata(req.repo, commit, file);
      await client.fetchFile(repoDir, meta, file);
      step(`download ${file}: ${meta.url} → ${meta.location === meta.url ? '' : `${new URL(meta.location).host}, `}blob ${meta.etag} (${meta.size ?? '?'} bytes)`);
    }
    writeRef(repoDir, req.revision, commit);
    const snapDir = path.join(repoDir, 'snapshots', commit);
    step(`download from ${endpoint}: ${req.repo}@${req.revision} is commit ${commit}, saved in ${snapDir} (winner)`);
    return { dir: snapDir, repo: req.repo, revision: req.revision, commit, files: filesIn(snapDir), source: 'download', chain };
  } catch (e) {
    const failure = hubFailureOf(e);
    if (failure === 'unreachable') {
      step(`download from ${endpoint}: ${(e as Error).message}`);
      if (cacheHit) {
        step(`Hub cache ${cacheHit.dir}: used, the Hub could not be reached (winner)`);
        return cacheHit;
      }
      throw notFound(`No weights for ${req.repo}@${req.revision} in the Hub cache ${cacheDir}, and the Hub at ${endpoint} could not be reached.`, chain, req, { repo: req.repo, revision: req.revision });
    }
    if (e instanceof RfdetrError) {
      step(`download from ${endpoint}: ${e.message.split('\n')[0]}`);
      if (e.details) e.details.chain = chain;
    }
    throw e;
  } finally {
    await client.close();
  }
}

function winner(hit: Found, step: (line: string) => void): Found {
  step(`Hub cache ${hit.dir}: used (winner)`);
  return hit;
}
