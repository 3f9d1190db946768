// `rfdetr --version`'s protocol line: a version-2 sidecar (before the hello's `variant`) is one this client still
// serves, so it is told as such, not as a mismatch; any other difference is a mismatch to rebuild.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { protocolLine } from '../../cli/version.ts';
import { PROTOCOL_VERSION, PROTOCOL_VERSION_WITHOUT_VARIANT } from '../../src/protocol/codec.ts';

const line = (sidecar: number | null) => protocolLine(PROTOCOL_VERSION, PROTOCOL_VERSION_WITHOUT_VARIANT, sidecar);

test('version: the same protocol is stated plainly', () => {
  assert.equal(line(PROTOCOL_VERSION), `protocol: ${PROTOCOL_VERSION} (this client), ${PROTOCOL_VERSION} (the sidecar)`);
});

test('version: a protocol-2 sidecar is served, not a mismatch', () => {
  const s = line(PROTOCOL_VERSION_WITHOUT_VARIANT);
  assert.doesNotMatch(s, /MISMATCH/);
  assert.match(s, /an older sidecar this client still serves/);
});

test('version: any other protocol is a mismatch to rebuild; an unknown one says unknown', () => {
  assert.match(line(PROTOCOL_VERSION + 1), /MISMATCH: rebuild the sidecar/);
  assert.match(line(1), /MISMATCH/);
  assert.equal(line(null), `protocol: ${PROTOCOL_VERSION} (this client), unknown (the sidecar)`);
});
