import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { ApiKey } from '../../generated/prisma/client.ts';
import { unixOrNull, unixSeconds } from '../../domain/context.ts';
import {
  getKey,
  keyStatus,
  listKeys,
  shownModels,
} from '../../domain/keys/service.ts';
import { CreateKey, KeyIdParams, ListKeysQuery, RotateKey, UpdateKey } from '../../domain/keys/schema.ts';
import { microsToUsd } from '../../kernel/money.ts';
import { KEY_PREFIX, redactSecret } from '../../domain/auth/service.ts';
import { Nullable } from '../../domain/schema.ts';
import { ListOf, sendList } from '../list.ts';
import { UnixOrNull, Unix } from '../response-fields.ts';
import { createKey, revokeKey, rotateKey, updateKey } from '../../domain/governance/guarded.ts';

/** The key object (spec 2.1, CONTRACT §3); the full secret only when given (create, rotate). */
/** The key object; a rotation's answer also carries `previous_secret_expires_at`, before the optional fields. */
export function presentKey(key: ApiKey, now: Date, secret?: string, rotated?: { previousSecretExpiresAt: Date }) {
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
    // CONTRACT §22: null, every model. (Before the optional fields: the serializer writes those last.)
    models: shownModels(key.models),
    ...(rotated ? { previous_secret_expires_at: unixSeconds(rotated.previousSecretExpiresAt) } : {}),
    ...(key.revokedAt ? { revoked_at: unixSeconds(key.revokedAt) } : {}),
    // CONTRACT §20: only on a key that carries one.
    ...(key.mcpTools?.length ? { mcp_tools: key.mcpTools } : {}),
  };
}

const keyProperties = {
  id: Type.String({ description: 'The key id (key_…).' }),
  object: Type.Literal('svc.api_key'),
  prefix: Type.String({ description: 'The prefix every secret starts with.' }),
  secret: Type.String({ description: 'The full secret on create and rotate (shown once); else redacted to its last 4 characters.' }),
  name: Type.String({ description: 'The key\'s name, unique among the project\'s active keys.' }),
  scopes: Type.Array(Type.String(), { description: 'The scopes the key holds.' }),
  project_id: Type.String({ description: 'The project the key belongs to (prj_…).' }),
  status: Type.String({ description: 'active, expired or revoked.' }),
  budget_usd: Nullable(Type.Number(), { description: 'The key\'s monthly budget in USD, or null: none.' }),
  expires_at: UnixOrNull('When the key expires'),
  created_at: Unix('When the key was created'),
  last_used_at: UnixOrNull('When the key last authenticated a request'),
  models: Nullable(Type.Array(Type.String()), { description: 'The models the key may use (model, provider/model, provider/*); null: every model.' }),
};
/** Present on some keys only: written after the fields every key has (fast-json-stringify writes them last). */
const optionalKeyProperties = {
  revoked_at: Type.Optional(Unix('When the key was revoked; only on a revoked key')),
  mcp_tools: Type.Optional(Type.Array(Type.String(), { description: 'The MCP tools the key may list and call (server/tool, server/*); only on a key that carries the list (absent: every tool its servers allow).' })),
};

/** presentKey's answer. */
export const KeyObject = Type.Object({ ...keyProperties, ...optionalKeyProperties }, { description: 'An API key (spec 2.1).' });

/** A rotation's answer: the key with its new secret, and when the previous secret stops working. */
const RotatedKey = Type.Object(
  { ...keyProperties, previous_secret_expires_at: Unix('When the previous secret stops authenticating'), ...optionalKeyProperties },
  { description: 'The rotated key, its new secret shown once.' },
);

export const keysRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.post('/v1/keys', { config: { action: 'key.create' }, schema: { body: CreateKey, response: { 200: KeyObject } } }, async (req) => {
    const key = await createKey(req.ctx, req.body);
    return presentKey(key, req.ctx.now(), key.secret);
  });

  app.get('/v1/keys', { config: { action: 'key.list' }, schema: { querystring: ListKeysQuery, response: { 200: ListOf(KeyObject) } } }, async (req, reply) => {
    const now = req.ctx.now();
    return sendList(reply, await listKeys(req.ctx, req.query), '/v1/keys', (k) => presentKey(k, now));
  });

  app.get('/v1/keys/:key_id', { config: { action: 'key.read' }, schema: { params: KeyIdParams, response: { 200: KeyObject } } }, async (req) =>
    presentKey(await getKey(req.ctx, req.params.key_id), req.ctx.now()),
  );

  // Beyond the contract (docs/DECISIONS.md): Stripe-style update of the fields given.
  app.post('/v1/keys/:key_id', { config: { action: 'key.update' }, schema: { params: KeyIdParams, body: UpdateKey, response: { 200: KeyObject } } }, async (req) =>
    presentKey(await updateKey(app.ports.keys, req.ctx, req.params.key_id, req.body ?? {}), req.ctx.now()),
  );

  app.post('/v1/keys/:key_id/rotate', { config: { action: 'key.rotate' }, schema: { params: KeyIdParams, body: RotateKey, response: { 200: RotatedKey } } }, async (req) => {
    const key = await rotateKey(app.ports.keys, req.ctx, req.params.key_id, req.body ?? {});
    const rotated = presentKey(key, req.ctx.now(), key.secret, { previousSecretExpiresAt: key.previousSecretExpiresAt });
    return rotated as typeof rotated & { previous_secret_expires_at: number };
  });

  app.post('/v1/keys/:key_id/revoke', { config: { action: 'key.revoke' }, schema: { params: KeyIdParams, response: { 200: KeyObject } } }, async (req) =>
    presentKey(await revokeKey(app.ports.keys, req.ctx, req.params.key_id), req.ctx.now()),
  );
};
