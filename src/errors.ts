// The one error table: code → HTTP status and default message. HTTP maps codes to status, never message text.
// Library code throws RfdetrError with a code; messages say what was wrong, what was expected, what to do.

// `retryAfter`: the condition is temporary and the response carries Retry-After.
export const ERRORS = {
  E_IMAGE_UNDECODABLE: { status: 400, message: 'image could not be decoded' },
  E_IMAGE_TOO_LARGE: { status: 400, message: 'image is too large' },
  E_BODY_ENCODING: { status: 400, message: 'the request body could not be decompressed' },
  E_BODY_TIMEOUT: { status: 408, message: 'the request body did not arrive in time' },
  E_BODY_TOO_LARGE: { status: 413, message: 'request body is too large' },
  E_SCHEMA: { status: 422, message: 'request does not match the schema' },
  E_VIDEO_TOO_LONG: { status: 422, message: 'the video is longer than the limit' },
  E_UNSUPPORTED_MEDIA: { status: 415, message: 'unsupported content type' },
  E_VIDEO_UNDECODABLE: { status: 400, message: 'video could not be decoded' },
  E_VIDEO_TOO_LARGE: { status: 413, message: 'video is over a limit' },
  E_VIDEO_TIMEOUT: { status: 504, message: 'the video source did not answer in time' },
  E_FFMPEG_MISSING: { status: 500, message: 'ffmpeg is not installed' },
  E_UNAUTHORIZED: { status: 401, message: 'an API key is required' },
  E_URL_NOT_ALLOWED: { status: 403, message: 'image_url is not allowed' },
  E_URL_FETCH: { status: 502, message: 'image_url could not be fetched' },
  E_NOT_FOUND: { status: 404, message: 'no such route' },
  E_MODEL_NOT_FOUND: { status: 404, message: 'no such model on this server' },
  E_METHOD_NOT_ALLOWED: { status: 405, message: 'method not allowed on this route' },
  E_STARTING: { status: 503, message: 'the model is starting', retryAfter: true },
  E_QUEUE_FULL: { status: 503, message: 'the request queue is full', retryAfter: true },
  E_DRAINING: { status: 503, message: 'the server is shutting down', retryAfter: true },
  E_DEADLINE: { status: 504, message: 'the request deadline passed' },
  E_INFERENCE: { status: 500, message: 'inference failed' },
  E_SIDECAR_EXITED: { status: 500, message: 'the sidecar exited' },
  E_SIDECAR_FAILED: { status: 503, message: 'the sidecar failed and is not restarting', retryAfter: true },
  E_PROTOCOL: { status: 500, message: 'sidecar protocol error' },
  // The sidecar declined to decode an image file (E_DECODE, or it decodes no such format): the server decodes it
  // itself and sends the pixels, so this never reaches a client unless that fallback is missing.
  E_SIDECAR_DECLINED: { status: 500, message: 'the sidecar declined to decode the image' },
  E_VERSION_MISMATCH: { status: 500, message: 'sidecar protocol version mismatch' },
  E_CLOSED: { status: 503, message: 'the backend was closed', retryAfter: true },
  E_ABORTED: { status: 499, message: 'the request was aborted by the client' },
  E_WEIGHTS_NOT_FOUND: { status: 500, message: 'model weights not found' },
  E_WEIGHTS_INVALID: { status: 500, message: 'model weights are invalid' },
  E_HUB: { status: 502, message: 'the model hub request failed' },
  E_USAGE: { status: 400, message: 'invalid usage' },
  E_INTERNAL: { status: 500, message: 'internal server error' },
} as const satisfies Record<string, { status: number; message: string; retryAfter?: true }>;

/** Whether responses with this code carry Retry-After (the table's `retryAfter`). */
export function retryable(code: ErrorCode): boolean {
  return (ERRORS[code] as { retryAfter?: true }).retryAfter === true;
}

export type ErrorCode = keyof typeof ERRORS;

export class RfdetrError extends Error {
  override name = 'RfdetrError';
  readonly code: ErrorCode;
  readonly details: Record<string, unknown> | undefined;
  constructor(code: ErrorCode, message?: string, details?: Record<string, unknown>, options?: { cause?: unknown }) {
    super(message ?? ERRORS[code].message, options);
    this.code = code;
    this.details = details;
  }
  get status(): number {
    return ERRORS[this.code].status;
  }
}

/** The 503 of a draining server: the table's text, what it means for this request (`why`), and what to do. */
export function drainingError(why: string): RfdetrError {
  return new RfdetrError('E_DRAINING', `${ERRORS.E_DRAINING.message} ${why}: retry on another replica`);
}

export function isRfdetrError(e: unknown, code?: ErrorCode): e is RfdetrError {
  return e instanceof RfdetrError && (code === undefined || e.code === code);
}
