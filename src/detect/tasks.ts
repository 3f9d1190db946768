// The model tasks this server serves, one entry each: the head outputs its postprocess reads (by name, with
// the shape the sidecar's hello must declare for them), the postprocess itself, and how `return_raw` renders
// the outputs. A sidecar whose hello names a task missing here, or lacks an output its task reads, is refused
// when it connects (src/sidecar/client.ts), so nothing below the table meets an unknown head.
import type { OutputSpec, SidecarInfo } from '../sidecar/backend.ts';
import { postprocess, rawToNested, type Detection, type PostprocessOptions } from './postprocess.ts';

/** A forward's head outputs by name (f32, the shapes the hello declared). */
export type Outputs = Readonly<Record<string, Float32Array>>;

/** The hello's facts a task's shapes depend on (the input side: a segment model's mask side is a quarter of it). */
export type ModelDims = Pick<SidecarInfo, 'numQueries' | 'numClasses'> & Partial<Pick<SidecarInfo, 'inputShape'>>;

export interface Task {
  /** The outputs the postprocess reads, in the order the sidecar declares them. */
  outputs(dims: ModelDims): OutputSpec[];
  /** Detections for one image, sorted by score descending. */
  postprocess(outputs: Outputs, dims: ModelDims, opts: PostprocessOptions): Detection[];
  /** The `return_raw` / `--raw` object: each output as nested arrays, under its wire name. */
  raw(outputs: Outputs, dims: ModelDims): Record<string, number[][]>;
}

/** An output the task reads; the client has checked it is present with the declared size. */
function output(outputs: Outputs, name: string): Float32Array {
  const o = outputs[name];
  if (!o) throw new RangeError(`postprocess: the forward has no '${name}' output; it has ${Object.keys(outputs).join(', ') || 'none'}`);
  return o;
}

const detect: Task = {
  outputs: ({ numQueries, numClasses }) => [
    { name: 'logits', dtype: 'f32', shape: [numQueries, numClasses] },
    { name: 'pred_boxes', dtype: 'f32', shape: [numQueries, 4] },
  ],
  postprocess: (outputs, { numQueries, numClasses }, opts) =>
    postprocess({ logits: output(outputs, 'logits'), predBoxes: output(outputs, 'pred_boxes'), numQueries, numClasses }, opts),
  raw: (outputs, { numQueries, numClasses }) => rawToNested(output(outputs, 'logits'), output(outputs, 'pred_boxes'), numQueries, numClasses),
};

/** RF-DETR Seg's mask logits are at stride 4: M = S/4 per side (78 at S = 312, 126 at 504). */
export function maskSideOf(dims: ModelDims): number {
  const s = dims.inputShape?.[1];
  if (s === undefined) throw new RangeError('a segment model\'s mask side is a quarter of its input side, but no input shape was given');
  return Math.floor(s / 4);
}

// RF-DETR Seg: the detect head plus the mask logits [Q, M, M], of which a reply carries the selected rows only
// (the queries the request's select picks; PROTOCOL.md, "Selected rows"). Detections come from logits and
// pred_boxes as for detect; the raw outputs are those two (a mask row per query would be Q·M² numbers of JSON).
const segment: Task = {
  outputs: (dims) => {
    const m = maskSideOf(dims);
    return [...detect.outputs(dims), { name: 'pred_masks', dtype: 'f32', shape: [dims.numQueries, m, m], rows: 'selected' }];
  },
  postprocess: detect.postprocess,
  raw: detect.raw,
};

const TASKS: Readonly<Record<string, Task>> = { detect, segment };

/** The output of `task` whose rows the request selects (segment: pred_masks), or undefined. */
export function selectedOutputOf(task: Task, dims: ModelDims): OutputSpec | undefined {
  return task.outputs(dims).find((o) => o.rows === 'selected');
}

/** The task names this server has a postprocess for. */
export const KNOWN_TASKS: readonly string[] = Object.keys(TASKS);

/** The task `name`; throws naming the known ones (the client refuses such a sidecar before this can run). */
export function taskFor(name: string): Task {
  const t = Object.hasOwn(TASKS, name) ? TASKS[name] : undefined;
  if (!t) throw new RangeError(`no postprocess for the task '${name}'; this server knows ${KNOWN_TASKS.join(', ')}`);
  return t;
}

/**
 * Why this server cannot serve a sidecar that declared `info` (its task unknown here, or an output the task
 * reads missing or of another dtype or shape), or undefined when it can.
 */
export function helloTaskError(info: Pick<SidecarInfo, 'task' | 'outputs' | 'numQueries' | 'numClasses'> & Partial<Pick<SidecarInfo, 'inputShape'>>): string | undefined {
  if (!Object.hasOwn(TASKS, info.task)) {
    return `the sidecar serves the task '${info.task}', which this server has no postprocess for (it knows ${KNOWN_TASKS.join(', ')}); use a server that serves '${info.task}' or a checkpoint of a known task`;
  }
  const declared = new Map(info.outputs.map((o) => [o.name, o]));
  const text = (o: OutputSpec) => `${o.name} ${o.dtype} [${o.shape.join(',')}]${o.rows ? ` rows ${o.rows}` : ''}`;
  for (const want of TASKS[info.task]!.outputs(info)) {
    const got = declared.get(want.name);
    if (!got || got.dtype !== want.dtype || got.rows !== want.rows || got.shape.length !== want.shape.length || got.shape.some((d, i) => d !== want.shape[i])) {
      return `the '${info.task}' task reads the output ${text(want)}, but the sidecar declares ${got ? text(got) : `no '${want.name}'`} (its outputs: ${info.outputs.map(text).join('; ') || 'none'})`;
    }
  }
  return undefined;
}
