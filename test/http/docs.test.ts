// GET /docs: Swagger UI over /openapi.json from the packaged copy: every script and stylesheet the page loads
// is served by this server (nothing from another origin), and the UI points at this server's document.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { start } from './helpers.ts';

test('/docs serves Swagger UI from the package, loading nothing from another origin', async () => {
  const s = await start();
  try {
    const page = await fetch(`${s.url}/docs`);
    assert.equal(page.status, 200);
    assert.match(page.headers.get('content-type')!, /text\/html/);
    const html = await page.text();
    assert.doesNotMatch(html, /https?:\/\//, 'no absolute URLs (no CDN)');
    const refs = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
    assert.deepEqual(refs.sort(), ['/docs/init.js', '/docs/swagger-ui-bundle.js', '/docs/swagger-ui-standalone-preset.js', '/docs/swagger-ui.css']);
    for (const ref of refs) {
      const r = await fetch(`${s.url}${ref}`);
      assert.equal(r.status, 200, ref);
      const body = await r.text();
      assert.ok(body.length > 0, ref);
      if (ref === '/docs/swagger-ui-bundle.js') assert.match(body, /SwaggerUIBundle/);
      if (ref === '/docs/init.js') assert.match(body, /url: '\/openapi\.json'/);
    }
    assert.equal((await fetch(`${s.url}/docs/package.json`)).status, 404, 'only the page\'s files are exposed');
    assert.equal((await fetch(`${s.url}/docs`, { method: 'POST' })).status, 405);
  } finally {
    await s.stop();
  }
});
