// `rfdetr track`: reads NDJSON frames as they arrive (a file, or stdin from a running `detect --json`) and
// writes each back at once with track ids, so a live pipe is tracked live. A line that is not a frame stops
// the run naming the line: tracking needs every frame in order, so guessing past one would give wrong ids.
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { Readable } from 'node:stream';
import { RfdetrError } from '../../src/errors.ts';
import { FrameTagger, type TrackableFrame } from '../../src/track/tag-frames.ts';
import { MAX_TRACK_DETECTIONS } from '../../src/track/bytetrack.ts';
import type { CliContext } from '../context.ts';
import { trackerOptions, type TrackerFlags } from '../track-options.ts';

function isFiniteNumber(v: unknown): v is number {
  return typeof v === 'number' && Number.isFinite(v);
}

function badDetection(d: unknown): boolean {
  if (typeof d !== 'object' || d === null) return true;
  const { box, score } = d as { box?: unknown; score?: unknown };
  return !Array.isArray(box) || box.length !== 4 || !box.every(isFiniteNumber) || !isFiniteNumber(score);
}

/** A line or value as the message shows it: at most 80 characters. */
function snippet(s: string): string {
  return s.length > 80 ? `${s.slice(0, 80)}…` : s;
}

async function openInput(ctx: CliContext, file: string): Promise<NodeJS.ReadableStream> {
  if (file === '-') return ctx.stdin ?? Readable.from([await ctx.readStdin()]);
  const p = path.resolve(ctx.cwd, file);
  const fh = await fs.promises.open(p, 'r').catch((e: NodeJS.ErrnoException) => {
    // a runtime error (exit 1), like a missing image for detect
    throw new Error(`cannot read ${file}: ${e.code ?? e.message}; expected an NDJSON file from rfdetr detect --json, or - for stdin`);
  });
  return fh.createReadStream();
}

export async function runTrack(ctx: CliContext, file: string, flags: TrackerFlags): Promise<void> {
  const tagger = new FrameTagger(trackerOptions(flags));
  const name = file === '-' ? 'stdin' : file;
  const lines = readline.createInterface({ input: await openInput(ctx, file), crlfDelay: Infinity });
  let n = 0;
  for await (const line of lines) {
    n++;
    if (line.trim() === '') continue;
    let v: unknown;
    try {
      v = JSON.parse(line);
    } catch {
      throw new RfdetrError('E_SCHEMA', `line ${n} of ${name} is not JSON: ${snippet(line)}; expected one JSON object per line, as rfdetr detect --json writes`);
    }
    if (typeof v !== 'object' || v === null || Array.isArray(v)) {
      throw new RfdetrError('E_SCHEMA', `line ${n} of ${name} is ${snippet(line)}, not an object; expected a JSON object per line, as rfdetr detect --json writes`);
    }
    if ('detections' in v) {
      const dets = (v as { detections: unknown }).detections;
      if (!Array.isArray(dets)) throw new RfdetrError('E_SCHEMA', `line ${n} of ${name}: "detections" is ${snippet(JSON.stringify(dets))}, not an array; expected the detections array of rfdetr detect --json`);
      if (dets.length > MAX_TRACK_DETECTIONS) {
        throw new RfdetrError('E_SCHEMA', `line ${n} of ${name} has ${dets.length} detections; rfdetr track takes at most ${MAX_TRACK_DETECTIONS} per frame (the most rfdetr detect --json gives; the assignment grows as n³ in them): keep the ${MAX_TRACK_DETECTIONS} best-scoring of each frame first, e.g. jq -c '.detections |= (sort_by(-.score) | .[:${MAX_TRACK_DETECTIONS}])'`);
      }
      const bad = dets.findIndex(badDetection);
      if (bad >= 0) {
        throw new RfdetrError('E_SCHEMA', `line ${n} of ${name}: detection ${bad} is ${snippet(JSON.stringify(dets[bad]))}; expected {"box": [x1, y1, x2, y2], "score": s, …} with finite numbers`);
      }
      tagger.tag(v as TrackableFrame);
    }
    ctx.stdout.write(`${JSON.stringify(v)}\n`);
  }
}
