// GET /docs: Swagger UI over /openapi.json, served from the swagger-ui-dist package (no CDN: the page works
// on a host without internet). Only the three files the page loads are exposed, not the package directory.
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import type { Express } from 'express';
import { route } from './request-log.ts';

const dist = path.dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
const ASSETS: Record<string, string> = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
  'swagger-ui-standalone-preset.js': 'text/javascript; charset=utf-8',
};

// The page's own script (not swagger-ui-dist's initializer, which points at a public demo document).
const PAGE = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>rfdetr-serve API</title>
<link rel="stylesheet" href="/docs/swagger-ui.css">
</head>
<body>
<div id="swagger-ui"></div>
<script src="/docs/swagger-ui-bundle.js"></script>
<script src="/docs/swagger-ui-standalone-preset.js"></script>
<script src="/docs/init.js"></script>
</body>
</html>
`;
const INIT = `window.ui = SwaggerUIBundle({
  url: '/openapi.json',
  dom_id: '#swagger-ui',
  deepLinking: true,
  presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset],
  layout: 'StandaloneLayout',
});
`;

export function registerDocs(app: Express): void {
  app.get('/docs', route('/docs'), (_req, res) => {
    res.type('html').send(PAGE);
  });
  app.get('/docs/init.js', route('/docs'), (_req, res) => {
    res.type('text/javascript').send(INIT);
  });
  for (const [name, type] of Object.entries(ASSETS)) {
    const file = path.join(dist, name);
    app.get(`/docs/${name}`, route('/docs'), (_req, res) => {
      res.setHeader('Content-Type', type);
      res.setHeader('Cache-Control', 'public, max-age=86400');
      fs.createReadStream(file).on('error', (e) => res.destroy(e)).pipe(res);
    });
  }
}
