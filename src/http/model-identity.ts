// The name and id the server gives the loaded variant (/health, /info, /v1/models, /tt-liveness, the OpenAPI
// description): RF-DETR-base under the seed contract's names, any other variant under its own.

export const MODEL_NAME = 'RF-DETR-base';
export const MODEL_ID = 'Roboflow/rf-detr-base';

/** The loaded variant as /health, /info, /v1/models and the OpenAPI document name it. */
export interface ModelIdentity {
  /** "RF-DETR-<variant>": RF-DETR-base (the seed contract's name), RF-DETR-nano, …; Seg: RF-DETR-Seg-Nano, … */
  name: string;
  /** /v1/models id: the Hub repo the checkpoint came from, else rf-detr-<variant> (Base: the contract's id). */
  id: string;
}

/** Names the variant `variant` (from the checkpoint's tensors; null: unknown, named as Base), loaded from `hubRepo`. */
export function modelIdentityOf(variant: string | null, hubRepo: string | null): ModelIdentity {
  if (variant === null || variant === 'base') return { name: MODEL_NAME, id: hubRepo ?? MODEL_ID };
  const id = hubRepo ?? `rf-detr-${variant.replaceAll('_', '-')}`;
  // RF-DETR Seg sizes are named as upstream spells them (RF-DETR-Seg-Nano, RF-DETR-Seg-2XLarge); the id is the
  // lower-case name.
  const seg = /^seg-(\d*x?)(.+)$/.exec(variant);
  if (seg) return { name: `RF-DETR-Seg-${seg[1]!.toUpperCase()}${seg[2]!.charAt(0).toUpperCase()}${seg[2]!.slice(1)}`, id };
  return { name: `RF-DETR-${variant}`, id };
}
