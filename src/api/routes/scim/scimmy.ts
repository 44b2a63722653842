import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import SCIMMY from 'scimmy';
import type { Operator } from '../../../generated/prisma/client.ts';
import type { OperatorPorts, RequestFacts } from '../../../domain/operators/ports.ts';
import { digest } from '../../../domain/operators/service.ts';
import {
  ProvisioningConflict,
  createGroup,
  createOperator,
  deleteGroup,
  deleteOperator,
  getGroup,
  getOperator,
  listGroups,
  listOperators,
  replaceGroup,
  replaceOperator,
  type GroupWithMembers,
} from '../../../domain/operators/provisioning.ts';
import { safeEqualHex } from '../../../domain/auth/service.ts';
import { SvcError } from '../../../errors/svc-error.ts';
import { SCIM_BASE, SCIM_TYPE, sendScim, sendScimError } from './responses.ts';

/**
 * SCIM 2.0 (RFC 7643/7644) for operators and their groups, parsed, filtered and patched by scimmy: this file only maps
 * its resources to the domain's provisioning functions and its messages to HTTP. Protected by a bearer token whose
 * SHA-256 alone is configured or kept (SVC_SCIM_TOKEN / SVC_SCIM_TOKEN_SHA256), compared in constant time.
 */

/** Failed bearer tokens allowed per source address: this many in a burst, then one every 60 / this seconds (6 s). */
export const SCIM_FAILED_TOKENS_PER_MINUTE = 10;

/** What scimmy hands the handlers as their context. */
interface ScimCtx {
  ports: OperatorPorts;
  facts: RequestFacts;
}

type UserIn = { userName: string; externalId?: string; displayName?: string; active?: boolean; emails?: { value: string; primary?: boolean }[] };
type GroupIn = { displayName: string; externalId?: string; members?: { value: string }[] };

function presentUser(o: Operator) {
  return {
    id: o.id,
    userName: o.userName,
    ...(o.externalId ? { externalId: o.externalId } : {}),
    ...(o.displayName ? { displayName: o.displayName } : {}),
    ...(o.email ? { emails: [{ value: o.email, primary: true, type: 'work' }] } : {}),
    active: o.active,
    meta: { created: o.createdAt, lastModified: o.updatedAt },
  };
}

function presentGroup(g: GroupWithMembers) {
  return {
    id: g.id,
    displayName: g.displayName,
    ...(g.externalId ? { externalId: g.externalId } : {}),
    members: g.members.map((m) => ({ value: m.operator.id, display: m.operator.userName, type: 'User' })),
    meta: { created: g.createdAt, lastModified: g.updatedAt },
  };
}

const userInput = (u: UserIn) => ({
  userName: u.userName,
  externalId: u.externalId ?? null,
  displayName: u.displayName ?? null,
  email: (u.emails?.find((e) => e.primary) ?? u.emails?.[0])?.value ?? null,
  active: u.active ?? true,
});

const groupInput = (g: GroupIn) => ({ displayName: g.displayName, externalId: g.externalId ?? null, members: (g.members ?? []).map((m) => m.value) });

/** The domain's refusals as SCIM errors (scimmy turns any other exception in a handler into a 404). */
function scimError(err: unknown): unknown {
  if (err instanceof ProvisioningConflict) return new SCIMMY.Types.Error(409, 'uniqueness', err.message);
  if (err instanceof SvcError && err.code === 'not_found') return new SCIMMY.Types.Error(404, null as never, err.message);
  if (err instanceof SvcError && err.code === 'invalid_request') return new SCIMMY.Types.Error(400, 'invalidValue', err.message);
  return err;
}
const mapped = async <T>(work: () => Promise<T>): Promise<T> => {
  try {
    return await work();
  } catch (err) {
    throw scimError(err);
  }
};

// scimmy's resources are process-wide classes: the handlers are declared once, and each request passes its own
// ports (database, session store) as scimmy's ctx, so several gateways in one process (tests) stay apart.
let declared = false;
function declareResources(): void {
  if (declared) return;
  declared = true;
  SCIMMY.Config.set({ patch: true, filter: true, sort: false, bulk: false, changePassword: false, etag: false });
  SCIMMY.Resources.User.basepath(SCIM_BASE);
  SCIMMY.Resources.Group.basepath(SCIM_BASE);
  SCIMMY.Resources.declare(SCIMMY.Resources.User)
    .ingress((resource, instance, ctx: ScimCtx) =>
      mapped(async () => {
        const input = userInput(instance as unknown as UserIn);
        const row = resource.id ? await replaceOperator(ctx.ports, ctx.facts, resource.id, input) : await createOperator(ctx.ports, ctx.facts, input);
        return presentUser(row) as never;
      }),
    )
    .egress((resource, ctx: ScimCtx) =>
      mapped(async () => {
        if (resource.id) return presentUser(await getOperator(ctx.ports, resource.id)) as never;
        const all = (await listOperators(ctx.ports)).map(presentUser);
        return (resource.filter ? resource.filter.match(all) : all) as never;
      }),
    )
    .degress((resource, ctx: ScimCtx) => mapped(() => deleteOperator(ctx.ports, ctx.facts, resource.id!)));

  SCIMMY.Resources.declare(SCIMMY.Resources.Group)
    .ingress((resource, instance, ctx: ScimCtx) =>
      mapped(async () => {
        const input = groupInput(instance as unknown as GroupIn);
        const row = resource.id ? await replaceGroup(ctx.ports, ctx.facts, resource.id, input) : await createGroup(ctx.ports, ctx.facts, input);
        return presentGroup(row) as never;
      }),
    )
    .egress((resource, ctx: ScimCtx) =>
      mapped(async () => {
        if (resource.id) return presentGroup(await getGroup(ctx.ports, resource.id)) as never;
        const all = (await listGroups(ctx.ports)).map(presentGroup);
        return (resource.filter ? resource.filter.match(all) : all) as never;
      }),
    )
    .degress((resource, ctx: ScimCtx) => mapped(() => deleteGroup(ctx.ports, ctx.facts, resource.id!)));
}

type ListQuery = { filter?: string; attributes?: string; excludedAttributes?: string; startIndex?: string; count?: string };

const listConfig = (q: ListQuery) => ({
  ...(q.filter !== undefined ? { filter: q.filter } : {}),
  ...(q.attributes !== undefined ? { attributes: q.attributes } : {}),
  ...(q.excludedAttributes !== undefined ? { excludedAttributes: q.excludedAttributes } : {}),
  ...(q.startIndex !== undefined && /^\d+$/.test(q.startIndex) ? { startIndex: Number(q.startIndex) } : {}),
  ...(q.count !== undefined && /^\d+$/.test(q.count) ? { count: Number(q.count) } : {}),
});

/** The SCIM routes, registered by api/routes/scim.ts once a token is configured (scimmy is loaded only then). */
export async function registerScim(app: FastifyInstance, tokenHash: string): Promise<void> {
  declareResources();

  // IdPs send application/scim+json (RFC 7644 §3.1); some send application/json, which the gateway already reads.
  app.addContentTypeParser(SCIM_TYPE, { parseAs: 'string' }, (_req, body, done) => {
    try {
      done(null, (body as string) === '' ? undefined : JSON.parse(body as string));
    } catch {
      const err = Object.assign(new Error('The body is not valid JSON.'), { statusCode: 400, scim: true });
      done(err, undefined);
    }
  });

  app.setErrorHandler((err: Error & { statusCode?: number }, req, reply) => {
    if (err instanceof SCIMMY.Types.Error) {
      const message = new SCIMMY.Messages.Error(err);
      return sendScim(reply, Number(message.status), message);
    }
    const status = err.statusCode && err.statusCode >= 400 && err.statusCode < 500 ? err.statusCode : 500;
    if (status === 500) req.log.error({ err }, 'scim: unexpected error');
    return sendScimError(reply, status, status === 500 ? 'An unexpected error occurred in the gateway.' : err.message, status === 400 ? 'invalidSyntax' : undefined);
  });

  // Failed tokens per source address, in the rate limiter's store (shared by the replicas with Redis): a burst of
  // SCIM_FAILED_TOKENS_PER_MINUTE, then one more every 60 / that seconds. While an address is throttled every SCIM
  // request from it is 429, a right token too: checking the token first would tell a guesser when it got it right.
  const { limiter, clock } = app.deps;
  const throttled = (reply: FastifyReply, retryAfter: number) =>
    sendScimError(reply.header('Retry-After', String(retryAfter)), 429, `Too many failed SCIM bearer tokens from this address: retry in ${retryAfter} s.`);
  app.addHook('onRequest', async (req, reply) => {
    const source = req.ip ?? 'unknown';
    const look = await limiter.authFailures(source, SCIM_FAILED_TOKENS_PER_MINUTE, clock.now(), false);
    if (look.retryAfter !== undefined) return throttled(reply, look.retryAfter);
    const match = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
    if (!match || match[1]!.length > 512 || !safeEqualHex(digest(match[1]!), tokenHash)) {
      const failed = await limiter.authFailures(source, SCIM_FAILED_TOKENS_PER_MINUTE, clock.now(), true);
      // Another failure from the same address filled the window between the look and now.
      if (!failed.counted) return throttled(reply, failed.retryAfter ?? 1);
      reply.header('WWW-Authenticate', 'Bearer realm="svc-scim"');
      return sendScimError(reply, 401, 'The SCIM bearer token is missing or wrong.');
    }
  });

  const ctxOf = (req: FastifyRequest): ScimCtx => ({ ports: app.ports.operators, facts: { requestId: req.id, ip: req.ip ?? null } });
  const resources = { Users: SCIMMY.Resources.User, Groups: SCIMMY.Resources.Group } as const;

  for (const [name, Resource] of Object.entries(resources)) {
    const path = `${SCIM_BASE}/${name}`;
    app.get<{ Querystring: ListQuery }>(path, async (req, reply) => sendScim(reply, 200, await new Resource(undefined, listConfig(req.query)).read(ctxOf(req))));
    app.get<{ Params: { id: string }; Querystring: ListQuery }>(`${path}/:id`, async (req, reply) =>
      sendScim(reply, 200, await new Resource(req.params.id, listConfig(req.query)).read(ctxOf(req))),
    );
    app.post(path, async (req, reply) => {
      const created = (await new Resource().write(req.body, ctxOf(req))) as { meta?: { location?: string } };
      if (created.meta?.location) reply.header('Location', created.meta.location);
      return sendScim(reply, 201, created);
    });
    app.put<{ Params: { id: string } }>(`${path}/:id`, async (req, reply) => sendScim(reply, 200, await new Resource(req.params.id).write(req.body, ctxOf(req))));
    app.patch<{ Params: { id: string } }>(`${path}/:id`, async (req, reply) => {
      const patched = await new Resource(req.params.id).patch(req.body as never, ctxOf(req));
      return patched === undefined ? sendScim(reply, 204) : sendScim(reply, 200, patched);
    });
    app.delete<{ Params: { id: string } }>(`${path}/:id`, async (req, reply) => {
      await new Resource(req.params.id).dispose(ctxOf(req));
      return sendScim(reply, 204);
    });
  }

  app.get(`${SCIM_BASE}/ServiceProviderConfig`, async (_req, reply) => sendScim(reply, 200, await new SCIMMY.Resources.ServiceProviderConfig().read()));
  app.get(`${SCIM_BASE}/ResourceTypes`, async (_req, reply) => sendScim(reply, 200, await new SCIMMY.Resources.ResourceType().read()));
  app.get(`${SCIM_BASE}/Schemas`, async (_req, reply) => sendScim(reply, 200, await new SCIMMY.Resources.Schema().read()));
}
