import type { FastifyPluginAsync } from 'fastify';
import type { ApiKey } from '../generated/prisma/client.ts';
import { unixOrNull, unixSeconds } from '../domain/context.ts';
import {
  getKey,
  keyStatus,
  listKeys,
  MICROS_PER_USD,
  type CreateKeyInput,
  type ListKeysQuery,
  type RotateKeyInput,
} from '../domain/keys/service.ts';
import { KEY_PREFIX, redactSecret } from '../domain/keys/secrets.ts';
import { pageQueryProperties, sendList } from './list.ts';
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
    budget_usd: key.budgetMicros === null ? null : Number(key.budgetMicros) / MICROS_PER_USD,
    expires_at: unixOrNull(key.expiresAt),
    created_at: unixSeconds(key.createdAt),
    last_used_at: unixOrNull(key.lastUsedAt),
    ...(key.revokedAt ? { revoked_at: unixSeconds(key.revokedAt) } : {}),
  };
}

const KeyIdParams = { type: 'object', properties: { key_id: { type: 'string' } }, required: ['key_id'] } as const;

export const keysRoutes: FastifyPluginAsync = async (app) => {
  app.post<{ Body: CreateKeyInput }>(
    '/v1/keys',
    {
      schema: {
        body: {
          type: 'object',
          additionalProperties: false,
          required: ['name', 'scopes'],
          properties: {
            project_id: { type: ['string', 'null'] },
            name: { type: 'string' },
            scopes: { type: 'array', items: { type: 'string' } },
            budget_usd: { type: ['number', 'null'] },
            expires_at: { type: ['integer', 'null'] },
          },
        },
      },
    },
    async (req) => {
      const key = await createKey(req.ctx, req.body);
      return presentKey(key, req.ctx.now(), key.secret);
    },
  );

  app.get<{ Querystring: ListKeysQuery }>(
    '/v1/keys',
    {
      schema: {
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: { ...pageQueryProperties, project_id: { type: 'string' } },
        },
      },
    },
    async (req, reply) => {
      const now = req.ctx.now();
      return sendList(reply, await listKeys(req.ctx, req.query), '/v1/keys', (k) => presentKey(k, now));
    },
  );

  app.get<{ Params: { key_id: string } }>('/v1/keys/:key_id', { schema: { params: KeyIdParams } }, async (req) =>
    presentKey(await getKey(req.ctx, req.params.key_id), req.ctx.now()),
  );

  app.post<{ Params: { key_id: string }; Body: RotateKeyInput | undefined }>(
    '/v1/keys/:key_id/rotate',
    {
      schema: {
        params: KeyIdParams,
        body: {
          type: ['object', 'null'],
          additionalProperties: false,
          properties: { project_id: { type: ['string', 'null'] }, overlap_hours: { type: ['integer', 'null'] } },
        },
      },
    },
    async (req) => {
      const key = await rotateKey(app.ports.keys, req.ctx, req.params.key_id, req.body ?? {});
      return {
        ...presentKey(key, req.ctx.now(), key.secret),
        previous_secret_expires_at: unixSeconds(key.previousSecretExpiresAt),
      };
    },
  );

  app.post<{ Params: { key_id: string } }>('/v1/keys/:key_id/revoke', { schema: { params: KeyIdParams } }, async (req) =>
    presentKey(await revokeKey(app.ports.keys, req.ctx, req.params.key_id), req.ctx.now()),
  );
};
