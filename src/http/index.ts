// The HTTP server's public surface, for the CLI (`rfdetr serve`) and tests.
export { createServer, MODEL_ID, MODEL_NAME, INPUT_SIZE, type CreateServerOptions, type ListenResult, type RfdetrServer, type WeightsInfo } from './server.ts';
export { READY_MESSAGE, LOG_LEVELS, createJsonLogger, isLogLevel, type LogLevel, type Logger } from './log.ts';
export { defaultPipeline, type Pipeline } from './pipeline.ts';
export { bodyLimitFor } from './body.ts';
