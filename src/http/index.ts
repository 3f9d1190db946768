// The HTTP server: its public surface (below) for the CLI (`rfdetr serve`) and tests, and the map of every
// module of src/http, each with its one job (test/http/index-names-modules.test.ts holds the map to the files).
//
//   server.ts            wires the rooms together: routes, middlewares, the backend's state, the budgets
//   lifecycle.ts         listen (the ready line once the engine is ready too) and drain
//   log.ts               the server's JSON log lines and its one ready line
//   engine-state.ts      the backend's lifecycle as probes and admission see it
//   probes.ts            the read-only routes: /health, /tt-liveness, /ready, /v1/health, /v1/models, /info
//   metrics.ts           the Prometheus series of one server instance
//   request-log.ts       request ids, one log line per request, the request metrics
//   respond.ts           errors → responses (status from the one error table)
//   auth.ts              API keys
//   client-id.ts         who a request is, for the fair share
//   connection-guard.ts  per-connection limits (pipelined requests, answers nobody reads)
//   active.ts            the requests in progress, for the drain, and the wait that ends when one is aborted
//   idle-gc.ts           one full garbage collection when the server goes quiet after traffic (its RSS back down)
//   admission.ts         the budgets a request passes through (bodies, memory, queue places, decode slots)
//   memory-budget.ts     the one memory budget (--memory-limit) for everything a request holds
//   limiter.ts           the weighted semaphore the budgets are made of, fair across clients
//   engine-queue.ts      clients in turn in front of the engine (or pool), cost-aware
//   virtual-time.ts      per-client virtual time for the engine queue's fair share
//   fair-share.ts        the one fair share of engine time across every model a server serves
//   predict-route.ts     POST /predict ahead of express's router (the same middlewares)
//   predict.ts           POST /predict: body → admission → a frame source run by the runner → JSON
//   predict-context.ts   the types a /predict request and each of its frames run under
//   frame-detector.ts    the server's detector for one frame: budgets around the backend's transport, engine queue
//   predict-video.ts     POST /predict/video: upload → a video slot → ffprobe → ffmpeg frames run by the runner → NDJSON
//   video-body.ts        a /predict/video body onto disk
//   video-uploads.ts     /predict/video uploads while they arrive: places, disk bytes, minimum rate, timeout
//   server-paths.ts      the server's paths taken out of an error before a client sees it
//   video-limits.ts      the /predict/video limits and their defaults
//   video-schema.ts      the /predict/video options and line schemas
//   body.ts              the three /predict body forms (JSON, multipart, raw) → image bytes and fields
//   multipart-body.ts    a multipart/form-data body (busboy): the image file part and the named fields, capped
//   json-image.ts        the JSON body's image parsed without a string of the whole body
//   content-encoding.ts  a body's Content-Encoding, inflated with its size capped
//   params.ts            the /predict fields validated, the class filter resolved
//   schema.ts            the one schema of the HTTP surface (TypeBox)
//   validate.ts          schema → 422s
//   openapi.ts           GET /openapi.json
//   docs.ts              GET /docs (Swagger UI from the package)
//   timeline.ts          one request's stage marks → Server-Timing and the timeline record
//   model-identity.ts    the name and id the server gives the loaded variant
//   served-models.ts     a request's model name → a model served, as the routes see it
//   model-lanes.ts       the models served, each its backend and queue; a swap and a removal drain the old one
//   server-lanes.ts      the server's models as lanes: each its engine state and a queue on the one fair share
//   models-file.ts       serve --weights ID=DIR and --models FILE read into model entries
//   admin.ts             POST /admin/reload (its own keys; off by default)
//   compat-roboflow.ts   Roboflow Inference's routes (inference-sdk) on the /predict pipeline
//   compat-deepstack.ts  DeepStack / CodeProject.AI's detection routes on the /predict pipeline
//   compat-openapi.ts    those routes in /openapi.json
//   discard-body.ts      a body read and thrown away before an answer decided ahead of it, so the client sees it
//   index.ts             this map and the public surface
export { createServer, MODEL_ID, MODEL_NAME, modelIdentityOf, type ModelIdentity, type CreateServerOptions, type ListenResult, type RfdetrServer, type WeightsInfo, type ModelSpec, type ModelLane, type ModelLanes } from './server.ts';
export { READY_MESSAGE, LOG_LEVELS, createJsonLogger, isLogLevel, type LogLevel, type Logger } from './log.ts';
export { bodyLimitFor } from './body.ts';
