// The one skip-or-fail rule for the TypeScript tests: a test whose subject cannot exist on this machine (a
// large shared fixture, a host tool, an opt-in run that costs minutes) skips with a reason that says how to
// enable it, and RFDETR_REQUIRE_ALL=1 turns every such skip into a failure. Nothing the repo builds itself
// (the sidecar, the CLI, src/http) is ever a reason to skip: its absence is a failure.
import assert from 'node:assert/strict';
import type { TestContext } from 'node:test';

/** True under RFDETR_REQUIRE_ALL=1: every skip is a failure. The only read of that variable in the tests. */
export const requireAll = process.env.RFDETR_REQUIRE_ALL === '1';

/** Skips the running test with `reason`, or fails it under RFDETR_REQUIRE_ALL=1. Use as `return skipOrFail(t, why)`. */
export function skipOrFail(t: Pick<TestContext, 'skip'>, reason: string): void {
  if (requireAll) assert.fail(`RFDETR_REQUIRE_ALL=1 and this test would skip: ${reason}`);
  t.skip(reason);
}
