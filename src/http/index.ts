// The HTTP server's public surface, for the CLI (`rfdetr serve`) and tests.
export { createServer, MODEL_ID, MODEL_NAME, modelIdentityOf, type ModelIdentity, type CreateServerOptions, type ListenResult, type RfdetrServer, type WeightsInfo } from './server.ts';
export { READY_MESSAGE, LOG_LEVELS, createJsonLogger, isLogLevel, type LogLevel, type Logger } from './log.ts';
export { bodyLimitFor } from './body.ts';
