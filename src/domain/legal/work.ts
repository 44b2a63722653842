import type { LegalContract, LegalDraft, Prisma, VerticalJob } from '../../generated/prisma/client.ts';
import type { Db, Tx } from '../../db/client.ts';
import type { WorkError, WorkKind } from '../verticals/work.ts';
import { applyRedline, checkMapping, type ModelMapping, type ModelRedline, type RequestedField } from './checks.ts';
import { diffFileName, unifiedDiff } from './diff.ts';
import { MAPPING_PROMPT, REDLINE_PROMPT } from './prompts.ts';
import { ContractText } from './quotes.ts';

/** The draft a job fills in and its contract (with the text). Work queued before its matter closed still runs. */
async function subject(db: Db | Tx, job: VerticalJob): Promise<{ draft: LegalDraft; contract: LegalContract }> {
  const draft = await db.legalDraft.findFirst({ where: { id: job.subjectId, projectId: job.projectId } });
  const contract = draft && (await db.legalContract.findFirst({ where: { id: draft.contractId, projectId: job.projectId } }));
  if (!draft || !contract) throw new Error(`legal work ${job.id}: its subject is gone`);
  return { draft, contract };
}

interface MappingParams {
  fields: RequestedField[];
  instructions?: string;
}
interface RedlineParams {
  playbook?: string;
  instructions?: string;
}

async function mappingVariables(db: Db, job: VerticalJob): Promise<Record<string, unknown>> {
  const { draft, contract } = await subject(db, job);
  const p = draft.params as unknown as MappingParams;
  return {
    contract_name: contract.name,
    contract_text: contract.text,
    fields: p.fields.map((f) => ({ name: f.name, ...(f.description ? { description: f.description } : {}) })),
    instructions: p.instructions ?? '',
  };
}

async function redlineVariables(db: Db, job: VerticalJob): Promise<Record<string, unknown>> {
  const { draft, contract } = await subject(db, job);
  const p = draft.params as unknown as RedlineParams;
  return { contract_name: contract.name, contract_text: contract.text, playbook: p.playbook ?? '', instructions: p.instructions ?? '' };
}

async function started(tx: Tx, job: VerticalJob): Promise<void> {
  await tx.legalDraft.updateMany({ where: { id: job.subjectId, status: 'queued' }, data: { status: 'running' } });
}

/** The quotes checked against the contract text; the mapping shows every requested field, found or not. */
async function mappingCompleted(tx: Tx, job: VerticalJob, result: unknown, now: Date): Promise<void> {
  const { draft, contract } = await subject(tx, job);
  const checked = checkMapping(new ContractText(contract.text), (draft.params as unknown as MappingParams).fields, result as ModelMapping);
  await tx.legalDraft.updateMany({
    where: { id: draft.id },
    data: { status: 'completed', result: checked as unknown as Prisma.InputJsonObject, completedAt: now },
  });
}

/** The edits located and applied by the gateway, and the unified diff of the contract text with them applied. */
async function redlineCompleted(tx: Tx, job: VerticalJob, result: unknown, now: Date): Promise<void> {
  const { draft, contract } = await subject(tx, job);
  const applied = applyRedline(new ContractText(contract.text), result as ModelRedline);
  const diff = unifiedDiff(contract.text, applied.replacements, diffFileName(contract.name, contract.id));
  await tx.legalDraft.updateMany({
    where: { id: draft.id },
    data: { status: 'completed', result: applied.result as unknown as Prisma.InputJsonObject, diff, completedAt: now },
  });
}

async function failed(tx: Tx, job: VerticalJob, error: WorkError, now: Date): Promise<void> {
  await tx.legalDraft.updateMany({ where: { id: job.subjectId }, data: { status: 'failed', error: error as unknown as Prisma.InputJsonObject, completedAt: now } });
}

/** The Legal vertical's model work: mappings and redlines of a contract. */
export const legalWork: WorkKind[] = [
  { kind: 'legal.mapping', prompt: MAPPING_PROMPT, variables: mappingVariables, started, completed: mappingCompleted, failed },
  { kind: 'legal.redline', prompt: REDLINE_PROMPT, variables: redlineVariables, started, completed: redlineCompleted, failed },
];
