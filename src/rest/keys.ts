import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { ApiKey } from '../generated/prisma/client.ts';
import { unixOrNull, unixSeconds } from '../domain/context.ts';
import {
  getKey,
  keyStatus,
  listKeys,
} from '../domain/keys/service.ts';
import { CreateKey, KeyIdParams, ListKeysQuery, RotateKey } from '../domain/keys/schema.ts';
import { microsToUsd } from '../kernel/money.ts';
import { KEY_PREFIX, redactSecret } from '../domain/keys/secrets.ts';
import { sendList } from './list.ts';
import { createKey, revokeKey, rotateKey } from '../domain/governance/guarded.ts';

/** The key object (spec 2.1, CONTRACT §3); the full secret only when given (create, rotate). */
export function presentKey(key: ApiKey, now: Date, secret?: string) {
  return {
    id: key.id,
    object: 'svc.api_key' as const,
    prefix: KEY_PREFIX,
    secret: secret ?? redactSecret(key.secretLast4),
    name: key.name,
    scopes: key.scopes,
    project_id: key.projectId,
    status: keyStatus(key, now),
    budget_usd: key.budgetMicros === null ? null : microsToUsd(key.budgetMicros),
    expires_at: unixOrNull(key.expiresAt),
    created_at: unixSeconds(key.createdAt),
    last_used_at: unixOrNull(key.lastUsedAt),
    ...(key.revokedAt ? { revoked_at: unixSeconds(key.revokedAt) } : {}),
  };
}

export const keysRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.post('/v1/keys', { schema: { body: CreateKey } }, async (req) => {
    const key = await createKey(req.ctx, req.body);
    return presentKey(key, req.ctx.now(), key.secret);
  });

  app.get('/v1/keys', { schema: { querystring: ListKeysQuery } }, async (req, reply) => {
    const now = req.ctx.now();
    return sendList(reply, await listKeys(req.ctx, req.query), '/v1/keys', (k) => presentKey(k, now));
  });

  app.get('/v1/keys/:key_id', { schema: { params: KeyIdParams } }, async (req) =>
    presentKey(await getKey(req.ctx, req.params.key_id), req.ctx.now()),
  );

  app.post('/v1/keys/:key_id/rotate', { schema: { params: KeyIdParams, body: RotateKey } }, async (req) => {
    const key = await rotateKey(app.ports.keys, req.ctx, req.params.key_id, req.body ?? {});
    return {
      ...presentKey(key, req.ctx.now(), key.secret),
      previous_secret_expires_at: unixSeconds(key.previousSecretExpiresAt),
    };
  });

  app.post('/v1/keys/:key_id/revoke', { schema: { params: KeyIdParams } }, async (req) =>
    presentKey(await revokeKey(app.ports.keys, req.ctx, req.params.key_id), req.ctx.now()),
  );
};
