// The Hugging Face Hub cache layout, as huggingface_hub writes and reads it, so Python tools, tt-model's
// pre-download and this package share one cache:
//   <cache>/models--ORG--NAME/blobs/<etag>                  file contents (etag = sha256 for LFS, git sha1 otherwise)
//   <cache>/models--ORG--NAME/snapshots/<commit>/<file>     relative symlink ../../blobs/<etag>
//   <cache>/models--ORG--NAME/refs/<branch>                 the commit a branch or tag resolved to (no newline)
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { RfdetrError } from '../errors.ts';

export const DEFAULT_REPO = 'Roboflow/rf-detr-base';
/** The pinned commit of Roboflow/rf-detr-base: the revision tt-model.yaml and SERVING.md pin. */
export const DEFAULT_REVISION = '7b95b089788e6c7db56d5ea9b0a07ca08ea6ac0a';
export const DEFAULT_ENDPOINT = 'https://huggingface.co';
export const MODEL_FILE = 'model.safetensors';
export const CONFIG_FILE = 'config.json';
export const WEIGHT_FILES = [MODEL_FILE, CONFIG_FILE] as const;

const COMMIT_RE = /^[0-9a-f]{40}$/;
// Hub repo ids: "name" or "namespace/name"; letters, digits, '-', '_', '.'; no '--' or '..' (huggingface_hub's rule).
const REPO_RE = /^(?:[A-Za-z0-9][\w.-]*\/)?[A-Za-z0-9][\w.-]*$/;

export function isCommitSha(revision: string): boolean {
  return COMMIT_RE.test(revision);
}

/** Throws E_USAGE naming the value unless `repo` is a Hub repo id. */
export function validateRepoId(repo: string, where: string): string {
  if (!REPO_RE.test(repo) || repo.includes('--') || repo.includes('..') || repo.length > 96) {
    throw new RfdetrError('E_USAGE', `Expected a Hub repo id like '${DEFAULT_REPO}' for ${where} but received ${JSON.stringify(repo)}`);
  }
  return repo;
}

/**
 * Throws E_USAGE naming the value unless `revision` is a commit sha or a branch/tag name that is safe as a path
 * under refs/ (huggingface_hub stores `refs/pr/1` as nested folders; '..' or a leading '/' would escape).
 */
export function validateRevision(revision: string, where: string): string {
  const bad = revision === '' || revision.length > 255 || revision.startsWith('/') || revision.endsWith('/')
    || revision.split('/').some((s) => s === '' || s === '.' || s === '..') || /[\0\\\s]/.test(revision);
  if (bad) {
    throw new RfdetrError('E_USAGE', `Expected a commit sha (40 hex digits) or a branch/tag name for ${where} but received ${JSON.stringify(revision)}`);
  }
  return revision;
}

function truthy(v: string | undefined): boolean {
  return v !== undefined && ['1', 'on', 'yes', 'true'].includes(v.trim().toLowerCase());
}

/** HF_HUB_OFFLINE as huggingface_hub reads it (1/ON/YES/TRUE, any case). */
export function hubOffline(env: NodeJS.ProcessEnv): boolean {
  return truthy(env.HF_HUB_OFFLINE);
}

/** The Hub cache directory and the variable that chose it (HF_HUB_CACHE, else HF_HOME/hub, else the default). */
export function hubCacheDir(env: NodeJS.ProcessEnv): { dir: string; from: string } {
  if (env.HF_HUB_CACHE) return { dir: path.resolve(expandHome(env.HF_HUB_CACHE)), from: 'HF_HUB_CACHE' };
  if (env.HF_HOME) return { dir: path.resolve(expandHome(env.HF_HOME), 'hub'), from: 'HF_HOME' };
  // huggingface_hub's default HF_HOME is $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface.
  if (env.XDG_CACHE_HOME) return { dir: path.resolve(env.XDG_CACHE_HOME, 'huggingface', 'hub'), from: 'XDG_CACHE_HOME' };
  return { dir: path.join(env.HOME || os.homedir(), '.cache', 'huggingface', 'hub'), from: 'default' };
}

function expandHome(p: string): string {
  return p === '~' || p.startsWith('~/') ? path.join(os.homedir(), p.slice(1)) : p;
}

/** `models--ORG--NAME` */
export function repoFolderName(repo: string): string {
  return ['models', ...repo.split('/')].join('--');
}

export function repoCacheDir(cacheDir: string, repo: string): string {
  return path.join(cacheDir, repoFolderName(repo));
}

/** If `dir` is `…/models--ORG--NAME/snapshots/<sha>`, the repo id and commit it stands for. */
export function parseSnapshotDir(dir: string): { repo: string; commit: string } | null {
  const parts = path.resolve(dir).split(path.sep);
  const commit = parts.at(-1);
  const snap = parts.at(-2);
  const folder = parts.at(-3);
  if (!commit || snap !== 'snapshots' || !folder || !COMMIT_RE.test(commit)) return null;
  const m = /^models--(.+)$/.exec(folder);
  if (!m || !m[1]) return null;
  return { repo: m[1].split('--').join('/'), commit };
}

/** The commit a revision names in the cache: itself if a sha, else the content of refs/<revision> if present. */
export function cachedCommit(repoDir: string, revision: string): { commit: string | null; refPath: string | null } {
  if (isCommitSha(revision)) return { commit: revision, refPath: null };
  const refPath = path.join(repoDir, 'refs', ...revision.split('/'));
  try {
    const text = fs.readFileSync(refPath, 'utf8').trim();
    return { commit: COMMIT_RE.test(text) ? text : null, refPath };
  } catch {
    return { commit: null, refPath };
  }
}

/** Writes refs/<revision> = commit when the revision is not the commit itself (atomically, only if it changed). */
export function writeRef(repoDir: string, revision: string, commit: string): void {
  if (revision === commit) return;
  const refPath = path.join(repoDir, 'refs', ...revision.split('/'));
  try {
    if (fs.readFileSync(refPath, 'utf8') === commit) return;
  } catch {
    // absent: write it
  }
  fs.mkdirSync(path.dirname(refPath), { recursive: true });
  const tmp = `${refPath}.tmp-${process.pid}`;
  fs.writeFileSync(tmp, commit);
  fs.renameSync(tmp, refPath);
}

/** Points snapshots/<commit>/<file> at blobs/<etag> with a relative symlink (replacing what was there). */
export function linkSnapshot(repoDir: string, commit: string, file: string, etag: string): string {
  const pointer = path.join(repoDir, 'snapshots', commit, file);
  const blob = path.join(repoDir, 'blobs', etag);
  fs.mkdirSync(path.dirname(pointer), { recursive: true });
  const rel = path.relative(path.dirname(pointer), blob);
  const tmp = `${pointer}.tmp-${process.pid}`;
  fs.rmSync(tmp, { force: true });
  fs.symlinkSync(rel, tmp);
  fs.renameSync(tmp, pointer);
  return pointer;
}

/** True when `p` exists as a readable regular file (following symlinks: a dangling snapshot link is absent). */
export function isFile(p: string): boolean {
  try {
    return fs.statSync(p).isFile();
  } catch {
    return false;
  }
}

export function isDirectory(p: string): boolean {
  try {
    return fs.statSync(p).isDirectory();
  } catch {
    return false;
  }
}
