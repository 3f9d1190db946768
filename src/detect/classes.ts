// Class filters by id or label name (the CLI's --classes and /predict's `classes`): names match the model's
// labels case-insensitively, numbers (or all-digit text) are class ids below the label count.

export interface ResolvedClasses {
  ids: Set<number>;
  /** The items that are neither a known label nor a class id, as given. */
  unknown: Array<string | number>;
  /** The label names that can be asked for, in class order. */
  known: string[];
}

export function resolveClassList(items: ReadonlyArray<string | number>, labels: readonly string[]): ResolvedClasses {
  const byName = new Map<string, number>();
  labels.forEach((l, i) => {
    if (l && l !== 'N/A' && !byName.has(l.toLowerCase())) byName.set(l.toLowerCase(), i);
  });
  const ids = new Set<number>();
  const unknown: Array<string | number> = [];
  for (const item of items) {
    const id = typeof item === 'number' ? item : /^\d+$/.test(item) ? Number(item) : undefined;
    if (id !== undefined && Number.isInteger(id) && id >= 0 && id < labels.length) ids.add(id);
    else if (typeof item === 'string' && byName.has(item.toLowerCase())) ids.add(byName.get(item.toLowerCase())!);
    else unknown.push(item);
  }
  return { ids, unknown, known: [...byName.keys()] };
}

export interface ResolvedThresholds {
  /** Class id → its threshold. */
  byId: Map<number, number>;
  /** The keys that are neither a known label nor a class id, as given. */
  unknown: string[];
  known: string[];
}

/** Per-class thresholds keyed by label name or id (`{"person": 0.4, "3": 0.7}`) → thresholds by class id. */
export function resolveClassThresholds(thresholds: Readonly<Record<string, number>>, labels: readonly string[]): ResolvedThresholds {
  const byId = new Map<number, number>();
  const unknown: string[] = [];
  let known: string[] = [];
  for (const [key, value] of Object.entries(thresholds)) {
    const r = resolveClassList([key], labels);
    known = r.known;
    const id = [...r.ids][0];
    if (id === undefined) unknown.push(key);
    else byId.set(id, value);
  }
  return { byId, unknown, known };
}

/** "cat, dog, … 80 in all": the first few names, for an error message. */
export function someNames(known: readonly string[], n = 12): string {
  return `${known.slice(0, n).join(', ')}${known.length > n ? `, … ${known.length} in all` : ''}`;
}
