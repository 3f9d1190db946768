// POST /admin/reload: the models file re-read, as SIGHUP does (serve --admin-key-file; off without it). Its own
// keys, never the API keys: a client that may predict may not swap the models. The key comes as
// "Authorization: Bearer KEY" or "X-API-Key: KEY"; the answer is the reload's report (which models were added,
// swapped, removed or failed, with the times), or the error that kept the file from being read.
import type { Express, Request, Response } from 'express';
import { RfdetrError } from '../errors.ts';
import { ApiKeys, presentedKey } from './auth.ts';
import type { ErrorResponder } from './respond.ts';
import { route } from './request-log.ts';

export const ADMIN_RELOAD_PATH = '/admin/reload';

export interface AdminOptions {
  /** The admin keys (serve --admin-key-file); a request without one of them is 401. */
  keys: ApiKeys;
  /** Re-reads the models file and applies it; resolves with its report (reloads run one at a time). */
  reload: () => Promise<object>;
}

export function isAdminPath(path: string): boolean {
  return path === ADMIN_RELOAD_PATH;
}

export function registerAdminRoutes(app: Express, d: AdminOptions & { errors: ErrorResponder }): void {
  app.post(ADMIN_RELOAD_PATH, route(ADMIN_RELOAD_PATH), async (req: Request, res: Response) => {
    try {
      const key = presentedKey(req);
      if (typeof key !== 'string' || d.keys.match(key) === null) {
        res.setHeader('WWW-Authenticate', `Bearer realm="rfdetr-admin"${key === undefined ? '' : ', error="invalid_token"'}`);
        throw new RfdetrError('E_UNAUTHORIZED', key === undefined
          ? 'POST /admin/reload needs an admin key (serve --admin-key-file): send it as "Authorization: Bearer KEY" or "X-API-Key: KEY"'
          : 'the admin key is not valid (exactly one key, one of --admin-key-file\'s; an API key is not an admin key)');
      }
      res.json(await d.reload());
    } catch (e) {
      d.errors.send(res, e);
    }
  });
}
