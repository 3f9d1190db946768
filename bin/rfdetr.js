#!/usr/bin/env node
// The `rfdetr` command: registers tsx so the TypeScript CLI runs without a build step, then starts it.
import { register } from 'tsx/esm/api';

register();
await import('../cli/main.ts');
