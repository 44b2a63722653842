import type { ApiKey, Prisma } from '../../generated/prisma/client.ts';
import { isUniqueViolation, type Tx } from '../../db/client.ts';
import { newId } from '../../db/ids.ts';
import { SvcError, invalid } from '../../errors/svc-error.ts';
import { recordAudit } from '../audit/service.ts';
import { recordReadAudit } from '../audit/console-session.ts';
import { ownTransaction, addressed, requireProjectId, visibleProjectId, type Ctx, type Checked } from '../context.ts';
import type { KeyPorts } from './ports.ts';
import { enqueueEvent } from '../events/outbox.ts';
import { microsToUsd, usdToMicros } from '../../kernel/money.ts';
import { paginate, type Page } from '../pagination.ts';
import { nameFold, normalizeName, parseInput } from '../validation.ts';
import { CreateKey, ListKeysQuery, MAX_KEY_NAME_CHARS, RotateKey } from './schema.ts';
import type { Scope } from './scopes.ts';
import { generateSecret, hashSecret } from '../auth/service.ts';
import { grantsWithin } from '../mcp/tools.ts';
import { badToolGrant } from '../mcp/schema.ts';
import { checkKeyModels, modelsBeyond } from '../auth/actions.ts';

/** A key row with, on create and rotate only, the full secret. */
export type KeyWithSecret = ApiKey & { secret?: string };

/**
 * A budget in micro-dollars, the unit spend is counted in: a positive amount under half a micro-dollar would round to a
 * budget of 0 that refuses everything, so it is refused instead (400 naming `budget_usd`).
 */
export function budgetMicros(usd: number): bigint {
  const micros = usdToMicros(usd);
  if (micros === 0n && usd > 0) throw invalid('budget_usd', 'budget_usd must be 0 or at least 0.000001 (one micro-dollar).');
  return micros;
}

/** The schema's checks (CreateKey), then what it cannot say: the name's characters, an expiry in the future, whole micro-dollars. */
function validateKeyInput(ctx: Ctx, raw: unknown): { input: CreateKey; name: string; scopes: Scope[]; budgetMicros: bigint | null; expiresAt: Date | null; mcpTools: string[]; models: string[] } {
  const input = parseInput(CreateKey, raw);
  const name = normalizeName(input.name, 'name', MAX_KEY_NAME_CHARS);
  const scopes = [...new Set(input.scopes)];
  const budget = input.budget_usd === undefined || input.budget_usd === null ? null : budgetMicros(input.budget_usd);
  let expiresAt: Date | null = null;
  if (input.expires_at !== undefined && input.expires_at !== null) {
    if (input.expires_at * 1000 <= ctx.now().getTime()) {
      throw invalid('expires_at', 'expires_at must be a Unix time in seconds in the future.');
    }
    expiresAt = new Date(input.expires_at * 1000);
  }
  // CONTRACT §20: stored empty when absent or null (every tool); the schema refuses an empty list.
  const badGrant = input.mcp_tools ? badToolGrant(input.mcp_tools) : null;
  if (badGrant !== null) throw invalid('mcp_tools', `mcp_tools entries must be server/tool or server/*: ${JSON.stringify(badGrant)} is not.`);
  const mcpTools = input.mcp_tools ? [...new Set(input.mcp_tools)] : [];
  // CONTRACT §22: likewise, stored empty when absent or null (every model).
  const models = input.models ? checkKeyModels(input.models) : [];
  return { input, name, scopes, budgetMicros: budget, expiresAt, mcpTools, models };
}

type KeyAction = 'grant' | 'rotate' | 'revoke' | 'update';

/**
 * A key may only hand out scopes it holds itself (CONTRACT §3): on create; on rotate, whose answer is the rotated
 * key's new secret (a keys:manage key rotating an admin key would otherwise get the admin's powers); and on revoke
 * (a keys:manage key may not switch off a key more powerful than itself). The operator acts on any key.
 */
export function assertScopeSubset(ctx: Ctx, scopes: readonly string[], action: KeyAction): void {
  if (ctx.caller.kind === 'operator') return;
  const held = new Set(ctx.caller.scopes);
  const extra = scopes.filter((s) => !held.has(s as Scope));
  if (extra.length > 0) {
    const message = {
      grant: `A key cannot grant scopes it does not hold: ${extra.join(', ')}.`,
      rotate: `A key cannot rotate a key holding scopes it does not hold: ${extra.join(', ')}.`,
      revoke: `A key cannot revoke a key holding scopes it does not hold: ${extra.join(', ')}.`,
      update: `A key cannot change a key holding scopes it does not hold: ${extra.join(', ')}.`,
    }[action];
    throw new SvcError('insufficient_scope', { param: action === 'grant' ? 'scopes' : 'key_id', message });
  }
}

/**
 * A key's hard stops travel with what it hands out: the key it creates, or the key whose new secret it gets by
 * rotating, must have a budget_usd no higher than the caller's and an expires_at no later than the caller's when the
 * caller has one (none counts as looser). Else 403 insufficient_scope, param budget_usd / expires_at on create and
 * key_id on rotate. `db` is the open transaction when there is one (PGlite has a single connection).
 */
export async function assertNoLooserThanCaller(
  ctx: Ctx,
  db: Tx,
  // On update only the fields that change are given (undefined: unchanged, not checked).
  child: { budgetMicros?: bigint | null; expiresAt?: Date | null; mcpTools?: string[]; models?: string[] },
  action: 'grant' | 'rotate' | 'update',
): Promise<void> {
  // The operator and console sessions (issue 22) have no budget or expiry of their own to pass on.
  if (ctx.caller.kind !== 'key') return;
  const own = await db.apiKey.findUnique({ where: { id: ctx.caller.keyId }, select: { budgetMicros: true, expiresAt: true, mcpTools: true, models: true } });
  if (!own) throw new SvcError('invalid_api_key');
  const verb = { grant: 'create', rotate: 'rotate', update: 'give' }[action];
  const param = (field: string) => (action === 'rotate' ? 'key_id' : field);
  if (child.budgetMicros !== undefined && own.budgetMicros !== null && (child.budgetMicros === null || child.budgetMicros > own.budgetMicros)) {
    throw new SvcError('insufficient_scope', {
      param: param('budget_usd'),
      message: `A key with budget_usd ${microsToUsd(own.budgetMicros)} cannot ${verb} a key without a budget_usd or with a higher one.`,
    });
  }
  if (child.expiresAt !== undefined && own.expiresAt !== null && (child.expiresAt === null || child.expiresAt.getTime() > own.expiresAt.getTime())) {
    throw new SvcError('insufficient_scope', {
      param: param('expires_at'),
      message: `A key expiring at ${Math.floor(own.expiresAt.getTime() / 1000)} cannot ${verb} a key without an expires_at or with a later one.`,
    });
  }
  // CONTRACT §20: a key narrowed to some MCP tools hands out no tool beyond them (empty: not narrowed).
  const outside = child.mcpTools === undefined ? [] : grantsWithin(own.mcpTools.length > 0 ? own.mcpTools : null, child.mcpTools.length > 0 ? child.mcpTools : null);
  if (outside.length > 0) {
    throw new SvcError('insufficient_scope', {
      param: param('mcp_tools'),
      message: `A key limited by mcp_tools cannot ${verb} a key with MCP tools beyond its own: ${outside.join(', ')}.`,
    });
  }
  // CONTRACT §22: nor a model beyond its own list (empty: not narrowed).
  const beyond = child.models === undefined ? [] : modelsBeyond(shownModels(own.models), shownModels(child.models));
  if (beyond.length > 0) {
    throw new SvcError('insufficient_scope', {
      param: param('models'),
      message: `A key limited by models cannot ${verb} a key with models beyond its own: ${beyond.join(', ')}.`,
    });
  }
}

export type NewKey = Checked & Omit<ReturnType<typeof validateKeyInput>, 'input'>;

const nameConflict = () => new SvcError('key_name_conflict', { param: 'name' });

/** createKey's validation (the input, what the caller may hand out, the project, a free name), writing nothing. */
export async function checkCreateKey(ctx: Ctx, raw: unknown): Promise<NewKey> {
  const { input, ...valid } = validateKeyInput(ctx, raw);
  assertScopeSubset(ctx, valid.scopes, 'grant');
  await assertNoLooserThanCaller(ctx, ctx.db, valid, 'grant');
  const projectId = await requireProjectId(ctx, input.project_id);
  // What the unique index (project, active name) would refuse at insert time.
  if (await ctx.db.apiKey.findFirst({ where: { projectId, activeName: nameFold(valid.name) }, select: { id: true } })) throw nameConflict();
  return { projectId, ...valid };
}

/** createKey's change, as checkCreateKey validated it; a name taken meanwhile is still key_name_conflict. */
export async function applyCreateKey(ctx: Ctx, valid: NewKey, transact = ownTransaction(ctx)): Promise<KeyWithSecret> {
  const { projectId } = valid;
  const secret = generateSecret();
  const now = ctx.now();
  try {
    const key = await transact(async (tx) => {
      const key = await tx.apiKey.create({
        data: {
          id: newId('key', now.getTime()),
          projectId,
          name: valid.name,
          activeName: nameFold(valid.name),
          scopes: valid.scopes,
          secretHash: hashSecret(secret),
          secretLast4: secret.slice(-4),
          budgetMicros: valid.budgetMicros,
          expiresAt: valid.expiresAt,
          mcpTools: valid.mcpTools,
          models: valid.models,
          status: 'active',
          createdAt: now,
          // Dual control's segregation of duties walks this (domain/governance/approvals.ts).
          createdBy: ctx.caller.keyId,
        },
      });
      await recordAudit(tx, ctx, 'key.create', {
        projectId,
        targetId: key.id,
        data: { name: key.name, scopes: key.scopes, ...(key.mcpTools.length > 0 ? { mcp_tools: key.mcpTools } : {}), ...(key.models.length > 0 ? { models: key.models } : {}) },
      });
      return key;
    });
    return { ...key, secret };
  } catch (err) {
    if (isUniqueViolation(err)) throw nameConflict();
    throw err;
  }
}

/** Audits key.create. A failed create (bad input, name conflict) stores nothing, audit included. */
export async function createKey(ctx: Ctx, raw: unknown): Promise<KeyWithSecret> {
  return applyCreateKey(ctx, await checkCreateKey(ctx, raw));
}

/** Audits key.list (spec §5: listing keys is an audited action). */
export async function listKeys(ctx: Ctx, raw: unknown): Promise<Page<ApiKey>> {
  const query = parseInput(ListKeysQuery, raw);
  const projectId = await visibleProjectId(ctx, query.project_id);
  const where: Prisma.ApiKeyWhereInput = projectId !== undefined ? { projectId } : {};
  const page = await paginate(query, {
    cursorField: 'id',
    fetch: ({ cursor, order, take }) =>
      ctx.db.apiKey.findMany({ where: cursor ? { ...where, id: cursor } : where, orderBy: { id: order }, take }),
    exists: async (id) => (await ctx.db.apiKey.count({ where: { ...where, id } })) > 0,
  });
  // From the admin console, at most once per session and page (audit/console-session.ts); API callers every time.
  await recordReadAudit(ctx, 'key.list', {
    projectId: projectId ?? null,
    data: { count: page.data.length, ...pickDefined(query) },
  }, query);
  return page;
}

function pickDefined(q: ListKeysQuery): Record<string, string | number> {
  const out: Record<string, string | number> = {};
  for (const [k, v] of Object.entries(q)) if (v !== undefined && v !== null) out[k] = v as string | number;
  return out;
}

/** Another project's key looks absent (404), so a key can never learn that it exists. */
export async function findVisibleKey(ctx: Ctx, tx: Tx, keyId: string, projectId: string | undefined): Promise<ApiKey> {
  const key = await tx.apiKey.findFirst({ where: { id: keyId, ...(projectId !== undefined ? { projectId } : {}) } });
  if (!key) throw new SvcError('not_found', { param: 'key_id', message: 'No such key.' });
  addressed(ctx, key.projectId);
  return key;
}

export async function getKey(ctx: Ctx, keyId: string): Promise<ApiKey> {
  return findVisibleKey(ctx, ctx.db, keyId, await visibleProjectId(ctx, null));
}

export function keyStatus(key: Pick<ApiKey, 'status' | 'expiresAt'>, now: Date): 'active' | 'revoked' | 'expired' {
  if (key.status === 'revoked') return 'revoked';
  if (key.expiresAt && key.expiresAt.getTime() <= now.getTime()) return 'expired';
  return 'active';
}

export interface KeyRotation extends Checked {
  keyId: string;
  /** visibleProjectId's answer: the key must (still) be in it when the rotation is applied. */
  visible: string | undefined;
  overlap: number;
}

/** An active key the caller may rotate; `db` is the open transaction when there is one. */
async function rotatable(ctx: Ctx, db: Tx, keyId: string, visible: string | undefined, now: Date): Promise<ApiKey> {
  const found = await findVisibleKey(ctx, db, keyId, visible);
  const status = keyStatus(found, now);
  if (status !== 'active') throw invalid('key_id', `A ${status} key cannot be rotated.`);
  assertScopeSubset(ctx, found.scopes, 'rotate');
  await assertNoLooserThanCaller(ctx, db, found, 'rotate');
  return found;
}

/** rotateKey's validation (the input; the key is visible, active, and no more powerful than the caller), writing nothing. */
export async function checkRotateKey(_ports: KeyPorts, ctx: Ctx, keyId: string, raw: unknown = {}): Promise<KeyRotation> {
  const overlap = parseInput(RotateKey, raw)?.overlap_hours ?? 0;
  const visible = await visibleProjectId(ctx, null);
  const found = await rotatable(ctx, ctx.db, keyId, visible, ctx.now());
  return { projectId: found.projectId, keyId, visible, overlap };
}

/** rotateKey's change, as checkRotateKey validated it (checked again in its transaction). */
export async function applyRotateKey(
  ports: KeyPorts,
  ctx: Ctx,
  { keyId, visible, overlap }: KeyRotation,
  transact = ownTransaction(ctx),
): Promise<KeyWithSecret & { previousSecretExpiresAt: Date }> {
  const secret = generateSecret();
  const now = ctx.now();
  const previousExpiresAt = new Date(now.getTime() + overlap * 3_600_000);
  const key = await transact(async (tx) => {
    const found = await rotatable(ctx, tx, keyId, visible, now);
    const rotated = await tx.apiKey.update({
      where: { id: found.id },
      data: {
        secretHash: hashSecret(secret),
        secretLast4: secret.slice(-4),
        previousSecretHash: overlap > 0 ? found.secretHash : null,
        previousExpiresAt: overlap > 0 ? previousExpiresAt : null,
        rotatedBy: ctx.caller.keyId,
        rotatedAt: now,
      },
    });
    const expiresUnix = Math.floor(previousExpiresAt.getTime() / 1000);
    await recordAudit(tx, ctx, 'key.rotate', {
      projectId: rotated.projectId,
      targetId: rotated.id,
      data: { overlap_hours: overlap, previous_secret_expires_at: expiresUnix },
    });
    await enqueueEvent(tx, now, rotated.projectId, 'key.rotated', {
      key_id: rotated.id,
      previous_secret_expires_at: expiresUnix,
    });
    return rotated;
  });
  await invalidateKey(ports, key.id);
  return { ...key, secret, previousSecretExpiresAt: previousExpiresAt };
}

/**
 * Issues a new secret for the same key id. The previous secret stays valid for overlap_hours (0 to 168, default 0);
 * a secret still in an earlier overlap is dropped at once. Audits key.rotate and emits key.rotated.
 */
export async function rotateKey(ports: KeyPorts, ctx: Ctx, keyId: string, raw: unknown = {}): Promise<KeyWithSecret & { previousSecretExpiresAt: Date }> {
  return applyRotateKey(ports, ctx, await checkRotateKey(ports, ctx, keyId, raw));
}

export interface KeyRevocation extends Checked {
  keyId: string;
  visible: string | undefined;
}

/** revokeKey's validation (the key is visible and no more powerful than the caller), writing nothing. */
export async function checkRevokeKey(_ports: KeyPorts, ctx: Ctx, keyId: string): Promise<KeyRevocation> {
  const visible = await visibleProjectId(ctx, null);
  const found = await findVisibleKey(ctx, ctx.db, keyId, visible);
  assertScopeSubset(ctx, found.scopes, 'revoke');
  return { projectId: found.projectId, keyId, visible };
}

/** revokeKey's change, as checkRevokeKey validated it (checked again in its transaction). */
export async function applyRevokeKey(ports: KeyPorts, ctx: Ctx, { keyId, visible }: KeyRevocation, transact = ownTransaction(ctx)): Promise<ApiKey> {
  const now = ctx.now();
  const key = await transact(async (tx) => {
    const found = await findVisibleKey(ctx, tx, keyId, visible);
    assertScopeSubset(ctx, found.scopes, 'revoke');
    if (found.status === 'revoked') return found;
    const revoked = await tx.apiKey.update({
      where: { id: found.id },
      data: { status: 'revoked', revokedAt: now, activeName: null, previousSecretHash: null, previousExpiresAt: null },
    });
    await recordAudit(tx, ctx, 'key.revoke', { projectId: revoked.projectId, targetId: revoked.id });
    await enqueueEvent(tx, now, revoked.projectId, 'key.revoked', { key_id: revoked.id });
    return revoked;
  });
  await invalidateKey(ports, key.id);
  return key;
}

/** Revoking twice returns the same key. Audits key.revoke and emits key.revoked, both only on the first call. */
export async function revokeKey(ports: KeyPorts, ctx: Ctx, keyId: string): Promise<ApiKey> {
  return applyRevokeKey(ports, ctx, await checkRevokeKey(ports, ctx, keyId));
}

/**
 * After commit: this replica evicts before the response is sent, so it never serves the old row again; the other
 * replicas hear it over the bus. A failed publish is logged, not thrown: the change itself is done, and the cache's
 * TTL and its resync on reconnect bound how long another replica can lag.
 */
export async function invalidateKey(ports: KeyPorts, keyId: string): Promise<void> {
  try {
    await ports.evictions.invalidate(keyId);
  } catch (err) {
    ports.log.warn({ err, keyId }, 'could not broadcast a key change; other replicas catch up within the cache TTL');
  }
}

/** A key's stored model list as the API shows it (CONTRACT §22): null when the key is not narrowed. */
export const shownModels = (stored: readonly string[] | null | undefined): string[] | null => (stored && stored.length > 0 ? [...stored] : null);
