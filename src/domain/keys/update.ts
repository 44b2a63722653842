import type { ApiKey, Prisma } from '../../generated/prisma/client.ts';
import { isUniqueViolation, type Tx } from '../../db/client.ts';
import { SvcError, invalid } from '../../errors/svc-error.ts';
import { microsToUsd } from '../../kernel/money.ts';
import { nameFold, normalizeName, parseInput } from '../validation.ts';
import { recordAudit } from '../audit/service.ts';
import { ownTransaction, visibleProjectId, type Ctx, type Checked } from '../context.ts';
import { badToolGrant } from '../mcp/schema.ts';
import { checkKeyModels } from '../auth/actions.ts';
import type { KeyPorts } from './ports.ts';
import { MAX_KEY_NAME_CHARS, UpdateKey } from './schema.ts';
import { assertNoLooserThanCaller, assertScopeSubset, budgetMicros, findVisibleKey, invalidateKey } from './service.ts';

/** The fields an update sets; a field left undefined stays as it is. */
export interface KeyChanges {
  name?: string;
  budgetMicros?: bigint | null;
  expiresAt?: Date | null;
  mcpTools?: string[];
  /** CONTRACT §22; empty: every model. */
  models?: string[];
}

export interface KeyUpdate extends Checked {
  keyId: string;
  visible: string | undefined;
  changes: KeyChanges;
}

/** The body as changes: what the schema cannot say (the name's characters, an expiry in the future, whole micro-dollars). */
function changesOf(ctx: Ctx, input: NonNullable<UpdateKey>): KeyChanges {
  const changes: KeyChanges = {};
  if (input.name !== undefined) changes.name = normalizeName(input.name, 'name', MAX_KEY_NAME_CHARS);
  if (input.budget_usd !== undefined) changes.budgetMicros = input.budget_usd === null ? null : budgetMicros(input.budget_usd);
  if (input.expires_at !== undefined) {
    if (input.expires_at !== null && input.expires_at * 1000 <= ctx.now().getTime()) {
      throw invalid('expires_at', 'expires_at must be a Unix time in seconds in the future (null: never).');
    }
    changes.expiresAt = input.expires_at === null ? null : new Date(input.expires_at * 1000);
  }
  if (input.mcp_tools !== undefined) {
    const bad = input.mcp_tools ? badToolGrant(input.mcp_tools) : null;
    if (bad !== null) throw invalid('mcp_tools', `mcp_tools entries must be server/tool or server/*: ${JSON.stringify(bad)} is not.`);
    // CONTRACT §20: stored empty for null (every tool).
    changes.mcpTools = input.mcp_tools ? [...new Set(input.mcp_tools)] : [];
  }
  if (input.models !== undefined) changes.models = checkKeyModels(input.models);
  return changes;
}

/**
 * A key the caller may change: visible, not revoked (an expired key may get a later expires_at), holding no scope the
 * caller lacks, and changed to nothing looser than the caller's own budget, expiry, MCP tools and models. `db` is the open
 * transaction when there is one.
 */
async function updatable(ctx: Ctx, db: Tx, keyId: string, visible: string | undefined, changes: KeyChanges): Promise<ApiKey> {
  const found = await findVisibleKey(ctx, db, keyId, visible);
  if (found.status === 'revoked') throw invalid('key_id', 'A revoked key cannot be changed.');
  assertScopeSubset(ctx, found.scopes, 'update');
  await assertNoLooserThanCaller(ctx, db, changes, 'update');
  return found;
}

const nameConflict = () => new SvcError('key_name_conflict', { param: 'name' });

/** updateKey's validation (the input, the key, what the caller may give, a free name), writing nothing. */
export async function checkUpdateKey(_ports: KeyPorts, ctx: Ctx, keyId: string, raw: unknown = {}): Promise<KeyUpdate> {
  const changes = changesOf(ctx, parseInput(UpdateKey, raw) ?? {});
  const visible = await visibleProjectId(ctx, null);
  const found = await updatable(ctx, ctx.db, keyId, visible, changes);
  if (changes.name !== undefined && nameFold(changes.name) !== found.activeName) {
    const taken = await ctx.db.apiKey.findFirst({ where: { projectId: found.projectId, activeName: nameFold(changes.name) }, select: { id: true } });
    if (taken) throw nameConflict();
  }
  return { projectId: found.projectId, keyId, visible, changes };
}

const usdOf = (micros: bigint | null) => (micros === null ? null : microsToUsd(micros));
const unixOf = (d: Date | null) => (d === null ? null : Math.floor(d.getTime() / 1000));

/** What actually changes, in the API's field names, before and after (the audit entry's data). */
function differences(found: ApiKey, changes: KeyChanges): { before: Prisma.InputJsonObject; after: Prisma.InputJsonObject; data: Prisma.ApiKeyUpdateInput } {
  const before: Record<string, Prisma.InputJsonValue | null> = {};
  const after: Record<string, Prisma.InputJsonValue | null> = {};
  const data: Prisma.ApiKeyUpdateInput = {};
  if (changes.name !== undefined && changes.name !== found.name) {
    before.name = found.name;
    after.name = changes.name;
    data.name = changes.name;
    data.activeName = nameFold(changes.name);
  }
  if (changes.budgetMicros !== undefined && changes.budgetMicros !== found.budgetMicros) {
    before.budget_usd = usdOf(found.budgetMicros);
    after.budget_usd = usdOf(changes.budgetMicros);
    data.budgetMicros = changes.budgetMicros;
  }
  if (changes.expiresAt !== undefined && unixOf(changes.expiresAt) !== unixOf(found.expiresAt)) {
    before.expires_at = unixOf(found.expiresAt);
    after.expires_at = unixOf(changes.expiresAt);
    data.expiresAt = changes.expiresAt;
  }
  if (changes.mcpTools !== undefined && JSON.stringify([...changes.mcpTools].sort()) !== JSON.stringify([...found.mcpTools].sort())) {
    before.mcp_tools = found.mcpTools.length > 0 ? found.mcpTools : null;
    after.mcp_tools = changes.mcpTools.length > 0 ? changes.mcpTools : null;
    data.mcpTools = changes.mcpTools;
  }
  if (changes.models !== undefined && JSON.stringify(changes.models) !== JSON.stringify(found.models)) {
    before.models = found.models.length > 0 ? found.models : null;
    after.models = changes.models.length > 0 ? changes.models : null;
    data.models = changes.models;
  }
  return { before: before as Prisma.InputJsonObject, after: after as Prisma.InputJsonObject, data };
}

/** updateKey's change, as checkUpdateKey validated it (checked again in its transaction). */
export async function applyUpdateKey(ports: KeyPorts, ctx: Ctx, { keyId, visible, changes }: KeyUpdate, transact = ownTransaction(ctx)): Promise<ApiKey> {
  let changed = false;
  try {
    const key = await transact(async (tx) => {
      const found = await updatable(ctx, tx, keyId, visible, changes);
      const { before, after, data } = differences(found, changes);
      if (Object.keys(after).length === 0) return found;
      changed = true;
      const updated = await tx.apiKey.update({ where: { id: found.id }, data });
      await recordAudit(tx, ctx, 'key.update', { projectId: updated.projectId, targetId: updated.id, data: { before, after } });
      return updated;
    });
    // A budget or an expiry is read from the key cache on every request: every replica must drop its copy.
    if (changed) await invalidateKey(ports, key.id);
    return key;
  } catch (err) {
    if (isUniqueViolation(err)) throw nameConflict();
    throw err;
  }
}

/**
 * Changes a key's name, budget_usd, expires_at, mcp_tools or models (the fields given; null clears all but the name). Updating
 * to the same values changes nothing and audits nothing; otherwise audits key.update with the before and after.
 */
export async function updateKey(ports: KeyPorts, ctx: Ctx, keyId: string, raw: unknown = {}): Promise<ApiKey> {
  return applyUpdateKey(ports, ctx, await checkUpdateKey(ports, ctx, keyId, raw));
}
