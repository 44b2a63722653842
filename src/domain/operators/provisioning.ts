import type { Operator, OperatorGroup } from '../../generated/prisma/client.ts';
import { newId } from '../../db/ids.ts';
import { SvcError, invalid } from '../../errors/svc-error.ts';
import type { OperatorPorts, RequestFacts } from './ports.ts';
import { auditOperator, endOperatorSessions } from './service.ts';

/**
 * SCIM provisioning (RFC 7643/7644, parsed by scimmy in api/routes/scim.ts): the rules on operators and groups. Every change
 * is audited with the actor `scim`. Deprovisioning (DELETE, or `active: false`) ends the operator's sessions at once.
 */

const SCIM_ACTOR = 'scim';

/** A SCIM uniqueness conflict (409 scimType "uniqueness"): the error table has no such code, SCIM has. */
export class ProvisioningConflict extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ProvisioningConflict';
  }
}

export interface OperatorInput {
  userName: string;
  externalId?: string | null;
  displayName?: string | null;
  email?: string | null;
  active?: boolean;
}

export interface GroupInput {
  displayName: string;
  externalId?: string | null;
  /** Operator ids. */
  members: string[];
}

export type GroupWithMembers = OperatorGroup & { members: { operator: Pick<Operator, 'id' | 'userName'> }[] };

const notFound = (what: string) => new SvcError('not_found', { message: `No such ${what}.` });

function checkOperator(input: OperatorInput): void {
  if (typeof input.userName !== 'string' || input.userName.trim() === '' || input.userName.length > 256) {
    throw invalid('userName', 'userName must be a non-empty string of at most 256 characters.');
  }
}

export const listOperators = (ports: OperatorPorts): Promise<Operator[]> => ports.db.operator.findMany({ orderBy: { id: 'asc' } });

export async function getOperator(ports: OperatorPorts, id: string): Promise<Operator> {
  const found = await ports.db.operator.findUnique({ where: { id } });
  if (!found) throw notFound('user');
  return found;
}

/** POST /scim/v2/Users. Audits operator.create. */
export async function createOperator(ports: OperatorPorts, facts: RequestFacts, input: OperatorInput): Promise<Operator> {
  checkOperator(input);
  const now = ports.clock.now();
  const userNameKey = input.userName.toLowerCase();
  if (await ports.db.operator.findUnique({ where: { userNameKey } })) throw new ProvisioningConflict(`userName ${input.userName} is taken.`);
  const operator = await ports.db.operator.create({
    data: {
      id: newId('opr', now),
      userName: input.userName,
      userNameKey,
      externalId: input.externalId ?? null,
      displayName: input.displayName ?? null,
      email: input.email ?? null,
      active: input.active ?? true,
      createdAt: new Date(now),
      updatedAt: new Date(now),
    },
  });
  await auditOperator(ports.db, facts, now, SCIM_ACTOR, 'operator.create', { targetId: operator.id, data: { user_name: operator.userName, active: operator.active } });
  return operator;
}

/** PUT (and PATCH, applied by scimmy to the current resource). `active: false` ends the sessions. Audits operator.update. */
export async function replaceOperator(ports: OperatorPorts, facts: RequestFacts, id: string, input: OperatorInput): Promise<Operator> {
  checkOperator(input);
  const current = await getOperator(ports, id);
  const userNameKey = input.userName.toLowerCase();
  if (userNameKey !== current.userNameKey && (await ports.db.operator.findUnique({ where: { userNameKey } }))) {
    throw new ProvisioningConflict(`userName ${input.userName} is taken.`);
  }
  const now = ports.clock.now();
  const operator = await ports.db.operator.update({
    where: { id },
    data: {
      userName: input.userName,
      userNameKey,
      externalId: input.externalId ?? null,
      displayName: input.displayName ?? null,
      email: input.email ?? null,
      active: input.active ?? true,
      updatedAt: new Date(now),
    },
  });
  await auditOperator(ports.db, facts, now, SCIM_ACTOR, 'operator.update', { targetId: id, data: { user_name: operator.userName, active: operator.active } });
  if (current.active && !operator.active) await endOperatorSessions(ports, facts, id, 'deactivated');
  return operator;
}

/** DELETE /scim/v2/Users/{id}: the sessions end first, then the operator and its memberships go. Audits operator.delete. */
export async function deleteOperator(ports: OperatorPorts, facts: RequestFacts, id: string): Promise<void> {
  const current = await getOperator(ports, id);
  await endOperatorSessions(ports, facts, id, 'deprovisioned');
  await ports.db.operator.delete({ where: { id } });
  await auditOperator(ports.db, facts, ports.clock.now(), SCIM_ACTOR, 'operator.delete', { targetId: id, data: { user_name: current.userName } });
}

const withMembers = { members: { select: { operator: { select: { id: true, userName: true } } } } } as const;

export const listGroups = (ports: OperatorPorts): Promise<GroupWithMembers[]> =>
  ports.db.operatorGroup.findMany({ orderBy: { id: 'asc' }, include: withMembers });

export async function getGroup(ports: OperatorPorts, id: string): Promise<GroupWithMembers> {
  const found = await ports.db.operatorGroup.findUnique({ where: { id }, include: withMembers });
  if (!found) throw notFound('group');
  return found;
}

async function checkGroup(ports: OperatorPorts, input: GroupInput, id: string | null): Promise<string[]> {
  if (typeof input.displayName !== 'string' || input.displayName.trim() === '' || input.displayName.length > 256) {
    throw invalid('displayName', 'displayName must be a non-empty string of at most 256 characters.');
  }
  const taken = await ports.db.operatorGroup.findUnique({ where: { displayNameKey: input.displayName.toLowerCase() }, select: { id: true } });
  if (taken && taken.id !== id) throw new ProvisioningConflict(`displayName ${input.displayName} is taken.`);
  const members = [...new Set(input.members)];
  const found = await ports.db.operator.count({ where: { id: { in: members } } });
  if (found !== members.length) throw invalid('members', 'members must name provisioned users by their id.');
  return members;
}

/** POST /scim/v2/Groups. Audits operator_group.create. */
export async function createGroup(ports: OperatorPorts, facts: RequestFacts, input: GroupInput): Promise<GroupWithMembers> {
  const members = await checkGroup(ports, input, null);
  const now = ports.clock.now();
  const id = newId('grp', now);
  await ports.db.operatorGroup.create({
    data: {
      id,
      displayName: input.displayName,
      displayNameKey: input.displayName.toLowerCase(),
      externalId: input.externalId ?? null,
      createdAt: new Date(now),
      updatedAt: new Date(now),
      members: { create: members.map((operatorId) => ({ operatorId })) },
    },
  });
  await auditOperator(ports.db, facts, now, SCIM_ACTOR, 'operator_group.create', { targetId: id, data: { display_name: input.displayName, members } });
  return getGroup(ports, id);
}

/**
 * PUT, and PATCH through scimmy (add/remove members): the members are replaced. Roles are read on every request, so
 * a member added or removed has its projects changed from its next request. Audits operator_group.update.
 */
export async function replaceGroup(ports: OperatorPorts, facts: RequestFacts, id: string, input: GroupInput): Promise<GroupWithMembers> {
  const before = await getGroup(ports, id);
  const members = await checkGroup(ports, input, id);
  const now = ports.clock.now();
  await ports.db.$transaction([
    ports.db.operatorGroupMember.deleteMany({ where: { groupId: id } }),
    ports.db.operatorGroupMember.createMany({ data: members.map((operatorId) => ({ groupId: id, operatorId })) }),
    ports.db.operatorGroup.update({
      where: { id },
      data: { displayName: input.displayName, displayNameKey: input.displayName.toLowerCase(), externalId: input.externalId ?? null, updatedAt: new Date(now) },
    }),
  ]);
  const previous = new Set(before.members.map((m) => m.operator.id));
  await auditOperator(ports.db, facts, now, SCIM_ACTOR, 'operator_group.update', {
    targetId: id,
    data: {
      display_name: input.displayName,
      added: members.filter((m) => !previous.has(m)),
      removed: [...previous].filter((m) => !members.includes(m)),
    },
  });
  return getGroup(ports, id);
}

/** DELETE /scim/v2/Groups/{id}: its members lose the roles it gave. Audits operator_group.delete. */
export async function deleteGroup(ports: OperatorPorts, facts: RequestFacts, id: string): Promise<void> {
  const current = await getGroup(ports, id);
  await ports.db.operatorGroup.delete({ where: { id } });
  await auditOperator(ports.db, facts, ports.clock.now(), SCIM_ACTOR, 'operator_group.delete', { targetId: id, data: { display_name: current.displayName } });
}
