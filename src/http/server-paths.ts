// An error on its way to a client with the server's own paths taken out. A video upload lives in a temporary
// directory; its path means nothing to the client and tells it where the server writes (the red team saw
// `"$TMPDIR/rfdetr-video-…/input" is not a readable video`). The video code names an upload "the uploaded video"
// itself (src/video's `name`); this is the net under it, for words it does not choose (ffmpeg's, a file
// system error's). The caller logs the original, with the request id, server-side.
import { RfdetrError, isRfdetrError } from '../errors.ts';

const SHOWN_AS = '(a server path)';

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/**
 * `text` with each path under one of `roots` replaced: the root and what follows it up to a space, a quote or
 * the punctuation tools put after a path (`:` in "PATH: Invalid data", `,`, `;`, `)`); the names the server
 * makes under its root (rfdetr-video-XXXXXX/input) have none of them.
 */
export function withoutServerPaths(text: string, roots: readonly string[]): string {
  let out = text;
  for (const r of roots) if (r.length > 1) out = out.replace(new RegExp(`${escapeRegExp(r)}[^\\s"'\`:,;)]*`, 'g'), SHOWN_AS);
  return out;
}

/**
 * `e` as it may be shown to a client: itself when no message or string detail names a path under `roots`,
 * else an RfdetrError with the same code (E_INTERNAL for any other error, worded as the responder words it)
 * whose text has each such path replaced.
 */
export function clientSafeError(e: unknown, roots: readonly string[]): unknown {
  const message = isRfdetrError(e) ? e.message : e instanceof Error ? `internal error: ${e.name}: ${e.message}` : String(e);
  const details = isRfdetrError(e) ? e.details : undefined;
  const safeMessage = withoutServerPaths(message, roots);
  let changed = safeMessage !== message;
  let safeDetails: Record<string, unknown> | undefined;
  if (details) {
    safeDetails = {};
    for (const [k, v] of Object.entries(details)) {
      const s = typeof v === 'string' ? withoutServerPaths(v, roots) : v;
      if (s !== v) changed = true;
      safeDetails[k] = s;
    }
  }
  if (!changed) return e;
  return new RfdetrError(isRfdetrError(e) ? e.code : 'E_INTERNAL', safeMessage, safeDetails, { cause: e });
}
