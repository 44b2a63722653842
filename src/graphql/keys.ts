import type { ApiKey } from '../generated/prisma/client.ts';
import {
  getKey,
  keyStatus,
  listKeys,
  shownModels,
} from '../domain/keys/service.ts';
import { CreateKey, UpdateKeyFields } from '../domain/keys/schema.ts';
import { microsToUsd } from '../kernel/money.ts';
import { KEY_PREFIX, redactSecret } from '../domain/auth/service.ts';
import { builder } from './builder.ts';
import { serviceConnection } from './connections.ts';
import { inputTypeFrom, listFilters, serviceInput } from './inputs.ts';
import { createKey, revokeKey, rotateKey, updateKey } from '../domain/governance/guarded.ts';

/** The key object of REST (spec 2.1, CONTRACT §3) with camelCase names; the secret is always redacted here. */
export const ApiKeyRef = builder.prismaObject('ApiKey', {
  fields: (t) => ({
    id: t.exposeID('id'),
    prefix: t.string({ resolve: () => KEY_PREFIX }),
    secret: t.string({
      description: 'Redacted: svc_sk_... and the last four characters. The full secret is only in CreateKeyPayload and RotateKeyPayload.',
      resolve: (key) => redactSecret(key.secretLast4),
    }),
    name: t.exposeString('name'),
    scopes: t.exposeStringList('scopes'),
    projectId: t.exposeID('projectId'),
    project: t.relation('project'),
    status: t.string({
      description: 'active, revoked or expired.',
      resolve: (key, _args, { ctx }) => keyStatus(key, ctx.now()),
    }),
    budgetUsd: t.float({
      nullable: true,
      resolve: (key) => (key.budgetMicros === null ? null : microsToUsd(key.budgetMicros)),
    }),
    expiresAt: t.expose('expiresAt', { type: 'UnixSeconds', nullable: true }),
    createdAt: t.expose('createdAt', { type: 'UnixSeconds' }),
    lastUsedAt: t.expose('lastUsedAt', { type: 'UnixSeconds', nullable: true }),
    revokedAt: t.expose('revokedAt', { type: 'UnixSeconds', nullable: true }),
    mcpTools: t.stringList({
      nullable: true,
      description: 'The MCP tools the key may list and call (server/tool, server/*); null: every tool its servers allow.',
      resolve: (key) => (key.mcpTools.length > 0 ? key.mcpTools : null),
    }),
    models: t.stringList({
      nullable: true,
      description: 'The models the key may use (model, provider/model, provider/*); null: every model.',
      resolve: (key) => shownModels(key.models),
    }),
  }),
});

const CreateKeyPayload = builder.objectRef<{ key: ApiKey; secret: string }>('CreateKeyPayload').implement({
  fields: (t) => ({
    key: t.field({ type: ApiKeyRef, resolve: (p) => p.key }),
    secret: t.exposeString('secret', { description: 'The full secret, shown once.' }),
  }),
});

const RotateKeyPayload = builder
  .objectRef<{ key: ApiKey; secret: string; previousSecretExpiresAt: Date }>('RotateKeyPayload')
  .implement({
    fields: (t) => ({
      key: t.field({ type: ApiKeyRef, resolve: (p) => p.key }),
      secret: t.exposeString('secret', { description: 'The new full secret, shown once.' }),
      previousSecretExpiresAt: t.expose('previousSecretExpiresAt', {
        type: 'UnixSeconds',
        description: 'Until then the previous secret still authenticates (now when overlapHours is 0).',
      }),
    }),
  });

const CreateKeyInput = inputTypeFrom('CreateKeyInput', CreateKey);
const UpdateKeyInput = inputTypeFrom('UpdateKeyInput', UpdateKeyFields);

builder.queryFields((t) => ({
  keys: t.connection(
    {
      type: ApiKeyRef,
      nullable: true,
      authScopes: { action: 'key.list' },
      description: 'Newest first. Audits key.list, as GET /v1/keys does.',
      args: { projectId: t.arg.id() },
      resolve: (_root, args, { ctx }) =>
        serviceConnection(args, (query) => listKeys(ctx, { ...query, ...listFilters(args) })),
    },
    { name: 'ApiKeyConnection' },
    { name: 'ApiKeyEdge' },
  ),
  key: t.field({
    type: ApiKeyRef,
    nullable: true,
    authScopes: { action: 'key.read' },
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, args, { ctx }) => getKey(ctx, String(args.id)),
  }),
}));

builder.mutationFields((t) => ({
  createKey: t.field({
    type: CreateKeyPayload,
    nullable: true,
    authScopes: { action: 'key.create' },
    description:
        'A key can only grant scopes it holds, and a budgetUsd / expiresAt no looser than its own (insufficient_scope naming budget_usd / expires_at). Audits key.create.',
    args: { input: t.arg({ type: CreateKeyInput, required: true }) },
    resolve: async (_root, { input }, { ctx }) => {
      const key = await createKey(ctx, serviceInput(input));
      return { key, secret: key.secret! };
    },
  }),
  rotateKey: t.field({
    type: RotateKeyPayload,
    nullable: true,
    authScopes: { action: 'key.rotate' },
    description:
      'New secret for the same key id; the previous one stays valid overlapHours (0 to 168). A key rotates only keys whose scopes it holds and whose budget and expiry are within its own. Audits key.rotate, emits key.rotated.',
    args: { id: t.arg.id({ required: true }), overlapHours: t.arg.int() },
    resolve: async (_root, { id, ...input }, { ctx, ports }) => {
      const key = await rotateKey(ports.keys, ctx, String(id), serviceInput(input));
      return { key, secret: key.secret!, previousSecretExpiresAt: key.previousSecretExpiresAt };
    },
  }),
  updateKey: t.field({
    type: ApiKeyRef,
    nullable: true,
    authScopes: { action: 'key.update' },
    description:
      'POST /v1/keys/{id}: changes the fields given (null clears budgetUsd, expiresAt, mcpTools, models). A key changes only keys whose scopes it holds, and to a budget, expiry, MCP tools and models no looser than its own. Audits key.update.',
    args: { id: t.arg.id({ required: true }), input: t.arg({ type: UpdateKeyInput, required: true }) },
    resolve: (_root, { id, input }, { ctx, ports }) => updateKey(ports.keys, ctx, String(id), serviceInput(input)),
  }),
  revokeKey: t.field({
    type: ApiKeyRef,
    nullable: true,
    authScopes: { action: 'key.revoke' },
    description: 'Revoking twice returns the same key. A key revokes only keys whose scopes it holds. Audits key.revoke, emits key.revoked.',
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, args, { ctx, ports }) => revokeKey(ports.keys, ctx, String(args.id)),
  }),
}));
