// The weights API: where the checkpoint comes from (resolve), whether it is the right one (verify), and the
// synthetic stand-in (synth). `rfdetr weights` and the server's /info use these.
export { resolveWeights, weightsRequest, type ResolvedWeights, type ResolveWeightsOptions, type WeightsSource } from './resolve.ts';
export { assertValidWeights, checkConfig, verifyWeights, type VerifyReport } from './verify.ts';
export { checkHeaderAgainstSchemas, loadSchema, loadSchemas, schemaFor, variantNames, type CheckpointSchema } from './schema.ts';
export { formatSeed, parseSeed, runSynth, type SynthResult } from './synth.ts';
export { syntheticMark, syntheticWarning, type SyntheticMark } from './synthetic.ts';
export { DEFAULT_REPO, DEFAULT_REVISION, hubCacheDir } from './hub-cache.ts';
