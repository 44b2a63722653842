import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { LegalDraft, LegalMatter } from '../generated/prisma/client.ts';
import { unixOrNull, unixSeconds } from '../domain/context.ts';
import {
  closeMatter,
  createContract,
  createContractJson,
  createMatter,
  draftParams,
  getContract,
  getContractText,
  getDraft,
  getMatter,
  listContracts,
  listDrafts,
  listMatters,
  mappingFields,
  redlineResult,
  requestMapping,
  requestRedline,
  updateMatter,
  type LegalContract,
} from '../domain/legal/service.ts';
import {
  CloseMatter,
  ContractFields,
  ContractIdParams,
  CreateContract,
  CreateMatter,
  ListMattersQuery,
  ListQuery,
  MappingIdParams,
  MatterIdParams,
  RedlineIdParams,
  RequestMapping,
  RequestRedline,
  UpdateMatter,
} from '../domain/legal/schema.ts';
import { sendList } from './list.ts';
import { acceptUploads, readUpload, uploadRouteOptions } from './uploads.ts';

/** POST /v1/legal/matters/{id}/contracts: the contract as JSON text, or a multipart form with its file. */
const contractUpload = uploadRouteOptions(CreateContract, {
  name: { type: 'string', description: "Default: the file's name." },
  project_id: { type: 'string' },
});

export function presentMatter(m: LegalMatter) {
  return {
    id: m.id,
    object: 'svc.legal_matter' as const,
    project_id: m.projectId,
    name: m.name,
    client: m.client,
    description: m.description,
    status: m.status as 'open' | 'closed',
    closed_at: unixOrNull(m.closedAt),
    closed_by: m.closedBy,
    close_reason: m.closeReason,
    created_at: unixSeconds(m.createdAt),
    updated_at: unixSeconds(m.updatedAt),
  };
}

/** A contract without its text (GET …/text reads it). */
export function presentContract(c: LegalContract) {
  return {
    id: c.id,
    object: 'svc.legal_contract' as const,
    project_id: c.projectId,
    matter_id: c.matterId,
    name: c.name,
    content_type: c.contentType,
    bytes: c.bytes,
    characters: c.characters,
    sha256: c.sha256,
    created_by: c.createdBy,
    created_at: unixSeconds(c.createdAt),
  };
}

const draftBase = (d: LegalDraft) => ({
  id: d.id,
  project_id: d.projectId,
  matter_id: d.matterId,
  contract_id: d.contractId,
  status: d.status as 'queued' | 'running' | 'completed' | 'failed',
  instructions: draftParams(d).instructions ?? null,
});

const draftEnd = (d: LegalDraft) => ({
  error: d.error ?? null,
  created_by: d.createdBy,
  created_at: unixSeconds(d.createdAt),
  completed_at: unixOrNull(d.completedAt),
});

/** Every requested field, with its value and quote (checked against the contract text) once completed. */
export function presentMapping(d: LegalDraft) {
  const { fields, flaggedQuotes } = mappingFields(d);
  return { ...draftBase(d), object: 'svc.legal_mapping' as const, fields, flagged_quotes: flaggedQuotes, ...draftEnd(d) };
}

/** The model's edits (each applied or not, by the gateway) and the unified diff of the contract text with them. */
export function presentRedline(d: LegalDraft) {
  const result = redlineResult(d);
  return {
    ...draftBase(d),
    object: 'svc.legal_redline' as const,
    playbook: draftParams(d).playbook ?? null,
    summary: result?.summary ?? null,
    edits: result?.edits ?? null,
    unapplied_edits: result?.unapplied_edits ?? null,
    diff: d.diff,
    ...draftEnd(d),
  };
}

/** CONTRACT §16, Legal: matters, their contracts, and the model's mappings and redlines of a contract. */
export const legalRoutes: FastifyPluginAsyncTypebox = async (app) => {
  // Contracts are uploaded as RAG documents are (rest/uploads.ts): multipart read in this plugin only.
  await acceptUploads(app);

  app.post('/v1/legal/matters', { schema: { body: CreateMatter } }, async (req) => presentMatter(await createMatter(req.ctx, req.body)));
  app.get('/v1/legal/matters', { schema: { querystring: ListMattersQuery } }, async (req, reply) =>
    sendList(reply, await listMatters(req.ctx, req.query), '/v1/legal/matters', presentMatter),
  );
  app.get('/v1/legal/matters/:matter_id', { schema: { params: MatterIdParams } }, async (req) => presentMatter(await getMatter(req.ctx, req.params.matter_id)));
  app.patch('/v1/legal/matters/:matter_id', { schema: { params: MatterIdParams, body: UpdateMatter } }, async (req) =>
    presentMatter(await updateMatter(req.ctx, req.params.matter_id, req.body)),
  );
  app.post('/v1/legal/matters/:matter_id/close', { schema: { params: MatterIdParams, body: CloseMatter } }, async (req) =>
    presentMatter(await closeMatter(req.ctx, req.params.matter_id, req.body ?? {})),
  );

  app.post(
    '/v1/legal/matters/:matter_id/contracts',
    { ...contractUpload, schema: { params: MatterIdParams, ...contractUpload.schema } },
    async (req, reply) => {
      const matterId = req.params.matter_id;
      if (!req.isMultipart()) return presentContract(await createContractJson(req.ctx, matterId, req.body));
      const upload = await readUpload(req, reply, ContractFields);
      if (!upload) return reply; // an Idempotency-Key's first answer, replayed
      const { file, contentType, fields } = upload;
      return presentContract(
        await createContract(req.ctx, matterId, {
          name: fields.name ?? (file.filename || 'contract'),
          contentType,
          data: file.data,
          bytes: file.bytes,
          param: 'file',
        }),
      );
    },
  );
  app.get('/v1/legal/matters/:matter_id/contracts', { schema: { params: MatterIdParams, querystring: ListQuery } }, async (req, reply) =>
    sendList(reply, await listContracts(req.ctx, req.params.matter_id, req.query), `/v1/legal/matters/${req.params.matter_id}/contracts`, presentContract),
  );
  app.get('/v1/legal/contracts/:contract_id', { schema: { params: ContractIdParams } }, async (req) =>
    presentContract(await getContract(req.ctx, req.params.contract_id)),
  );
  app.get('/v1/legal/contracts/:contract_id/text', { schema: { params: ContractIdParams } }, async (req) => {
    const { contract, text } = await getContractText(req.ctx, req.params.contract_id);
    return { object: 'svc.legal_contract_text' as const, contract_id: contract.id, sha256: contract.sha256, text };
  });

  app.post('/v1/legal/contracts/:contract_id/mappings', { schema: { params: ContractIdParams, body: RequestMapping } }, async (req) =>
    presentMapping(await requestMapping(req.ctx, req.params.contract_id, req.body)),
  );
  app.get('/v1/legal/contracts/:contract_id/mappings', { schema: { params: ContractIdParams, querystring: ListQuery } }, async (req, reply) =>
    sendList(reply, await listDrafts(req.ctx, 'mapping', req.params.contract_id, req.query), `/v1/legal/contracts/${req.params.contract_id}/mappings`, presentMapping),
  );
  app.get('/v1/legal/mappings/:mapping_id', { schema: { params: MappingIdParams } }, async (req) =>
    presentMapping(await getDraft(req.ctx, 'mapping', req.params.mapping_id)),
  );

  app.post('/v1/legal/contracts/:contract_id/redlines', { schema: { params: ContractIdParams, body: RequestRedline } }, async (req) =>
    presentRedline(await requestRedline(req.ctx, req.params.contract_id, req.body ?? {})),
  );
  app.get('/v1/legal/contracts/:contract_id/redlines', { schema: { params: ContractIdParams, querystring: ListQuery } }, async (req, reply) =>
    sendList(reply, await listDrafts(req.ctx, 'redline', req.params.contract_id, req.query), `/v1/legal/contracts/${req.params.contract_id}/redlines`, presentRedline),
  );
  app.get('/v1/legal/redlines/:redline_id', { schema: { params: RedlineIdParams } }, async (req) =>
    presentRedline(await getDraft(req.ctx, 'redline', req.params.redline_id)),
  );
};
