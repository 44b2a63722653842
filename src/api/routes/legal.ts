import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { LegalDraft, LegalMatter } from '../../generated/prisma/client.ts';
import { unixOrNull, unixSeconds } from '../../domain/context.ts';
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
} from '../../domain/legal/service.ts';
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
} from '../../domain/legal/schema.ts';
import { Type } from 'typebox';
import { ListOf, sendList } from '../list.ts';
import { Int, Json, NullableInt, NullableStr, ObjectType, Str, Unix, UnixOrNull } from '../response-fields.ts';
import { acceptUploads, readUpload, uploadRouteOptions } from './uploads.ts';

/** POST /v1/legal/matters/{id}/contracts: the contract as JSON text, or a multipart form with its file. */
const contractUpload = uploadRouteOptions(CreateContract, {
  name: { type: 'string', description: "Default: the file's name." },
  project_id: { type: 'string' },
});

const Matter = Type.Object(
  {
    id: Str('The matter id.'),
    object: ObjectType('svc.legal_matter'),
    project_id: Str('The project it belongs to.'),
    name: Str('Its name.'),
    client: NullableStr('The client, or null.'),
    description: NullableStr('What it is about, or null.'),
    status: Str('open or closed.'),
    closed_at: UnixOrNull('Closed'),
    closed_by: NullableStr('Who closed it (a key or operator id), or null.'),
    close_reason: NullableStr('Why it was closed, or null.'),
    created_at: Unix('Created'),
    updated_at: Unix('Last changed'),
  },
  { description: 'A legal matter.' },
);

const Contract = Type.Object(
  {
    id: Str('The contract id.'),
    object: ObjectType('svc.legal_contract'),
    project_id: Str('The project it belongs to.'),
    matter_id: Str('The matter it belongs to.'),
    name: Str('Its name.'),
    content_type: Str('The uploaded content type.'),
    bytes: Int('Its size as uploaded, in bytes.'),
    characters: Int('Characters of extracted text.'),
    sha256: Str('SHA-256 of the extracted text, hex.'),
    created_by: Str('Who uploaded it (a key or operator id).'),
    created_at: Unix('Uploaded'),
  },
  { description: 'A contract, without its text (GET …/text reads it).' },
);

const ContractText = Type.Object(
  {
    object: ObjectType('svc.legal_contract_text'),
    contract_id: Str('The contract.'),
    sha256: Str('SHA-256 of the text, hex.'),
    text: Str('The extracted text.'),
  },
  { description: "A contract's text." },
);

const draftHead = {
  id: Str('The draft id.'),
  project_id: Str('The project it belongs to.'),
  matter_id: Str('The matter.'),
  contract_id: Str('The contract it reads.'),
  status: Str('queued, running, completed or failed.'),
  instructions: NullableStr('Instructions given with the request, or null.'),
};
const draftTail = {
  error: Json("A failed draft's why, {code, message}, or null."),
  created_by: Str('Who asked for it (a key or operator id).'),
  created_at: Unix('Requested'),
  completed_at: UnixOrNull('Finished'),
};

const Mapping = Type.Object(
  {
    ...draftHead,
    object: ObjectType('svc.legal_mapping'),
    fields: Type.Array(Json('A field: name, description, value, quote, found, quote_verified, quote_start (null until completed).'), {
      description: 'Every requested field.',
    }),
    flagged_quotes: NullableInt('How many quotes were not found in the contract text; null until completed.'),
    ...draftTail,
  },
  { description: "The model's mapping of fields in a contract." },
);

const Redline = Type.Object(
  {
    ...draftHead,
    object: ObjectType('svc.legal_redline'),
    playbook: NullableStr('The playbook given, or null.'),
    summary: Json("The model's summary of its edits; null until completed."),
    edits: Json("The model's edits, each applied or not; null until completed."),
    unapplied_edits: Json('The edits that could not be applied; null until completed.'),
    diff: NullableStr('The unified diff of the contract text with the edits; null until completed.'),
    ...draftTail,
  },
  { description: "The model's redline of a contract." },
);

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
  // Contracts are uploaded as RAG documents are (api/routes/uploads.ts): multipart read in this plugin only.
  await acceptUploads(app);

  app.post('/v1/legal/matters', { config: { action: 'legal_matter.create' }, schema: { body: CreateMatter, response: { 200: Matter } } }, async (req) => presentMatter(await createMatter(req.ctx, req.body)));
  app.get('/v1/legal/matters', { config: { action: 'legal_matter.list' }, schema: { querystring: ListMattersQuery, response: { 200: ListOf(Matter) } } }, async (req, reply) =>
    sendList(reply, await listMatters(req.ctx, req.query), '/v1/legal/matters', presentMatter),
  );
  app.get('/v1/legal/matters/:matter_id', { config: { action: 'legal_matter.read' }, schema: { params: MatterIdParams, response: { 200: Matter } } }, async (req) => presentMatter(await getMatter(req.ctx, req.params.matter_id)));
  app.patch('/v1/legal/matters/:matter_id', { config: { action: 'legal_matter.update' }, schema: { params: MatterIdParams, body: UpdateMatter, response: { 200: Matter } } }, async (req) =>
    presentMatter(await updateMatter(req.ctx, req.params.matter_id, req.body)),
  );
  app.post('/v1/legal/matters/:matter_id/close', { config: { action: 'legal_matter.close' }, schema: { params: MatterIdParams, body: CloseMatter, response: { 200: Matter } } }, async (req) =>
    presentMatter(await closeMatter(req.ctx, req.params.matter_id, req.body ?? {})),
  );

  app.post('/v1/legal/matters/:matter_id/contracts',
    { ...contractUpload, config: { ...contractUpload.config, action: 'legal_contract.create' }, schema: { params: MatterIdParams, ...contractUpload.schema, response: { 200: Contract } } },
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
  app.get('/v1/legal/matters/:matter_id/contracts', { config: { action: 'legal_contract.list' }, schema: { params: MatterIdParams, querystring: ListQuery, response: { 200: ListOf(Contract) } } }, async (req, reply) =>
    sendList(reply, await listContracts(req.ctx, req.params.matter_id, req.query), `/v1/legal/matters/${req.params.matter_id}/contracts`, presentContract),
  );
  app.get('/v1/legal/contracts/:contract_id', { config: { action: 'legal_contract.read' }, schema: { params: ContractIdParams, response: { 200: Contract } } }, async (req) =>
    presentContract(await getContract(req.ctx, req.params.contract_id)),
  );
  app.get('/v1/legal/contracts/:contract_id/text', { config: { action: 'legal_contract.read' }, schema: { params: ContractIdParams, response: { 200: ContractText } } }, async (req) => {
    const { contract, text } = await getContractText(req.ctx, req.params.contract_id);
    return { object: 'svc.legal_contract_text' as const, contract_id: contract.id, sha256: contract.sha256, text };
  });

  app.post('/v1/legal/contracts/:contract_id/mappings', { config: { action: 'legal_mapping.create' }, schema: { params: ContractIdParams, body: RequestMapping, response: { 200: Mapping } } }, async (req) =>
    presentMapping(await requestMapping(req.ctx, req.params.contract_id, req.body)),
  );
  app.get('/v1/legal/contracts/:contract_id/mappings', { config: { action: 'legal_mapping.list' }, schema: { params: ContractIdParams, querystring: ListQuery, response: { 200: ListOf(Mapping) } } }, async (req, reply) =>
    sendList(reply, await listDrafts(req.ctx, 'mapping', req.params.contract_id, req.query), `/v1/legal/contracts/${req.params.contract_id}/mappings`, presentMapping),
  );
  app.get('/v1/legal/mappings/:mapping_id', { config: { action: 'legal_mapping.read' }, schema: { params: MappingIdParams, response: { 200: Mapping } } }, async (req) =>
    presentMapping(await getDraft(req.ctx, 'mapping', req.params.mapping_id)),
  );

  app.post('/v1/legal/contracts/:contract_id/redlines', { config: { action: 'legal_redline.create' }, schema: { params: ContractIdParams, body: RequestRedline, response: { 200: Redline } } }, async (req) =>
    presentRedline(await requestRedline(req.ctx, req.params.contract_id, req.body ?? {})),
  );
  app.get('/v1/legal/contracts/:contract_id/redlines', { config: { action: 'legal_redline.list' }, schema: { params: ContractIdParams, querystring: ListQuery, response: { 200: ListOf(Redline) } } }, async (req, reply) =>
    sendList(reply, await listDrafts(req.ctx, 'redline', req.params.contract_id, req.query), `/v1/legal/contracts/${req.params.contract_id}/redlines`, presentRedline),
  );
  app.get('/v1/legal/redlines/:redline_id', { config: { action: 'legal_redline.read' }, schema: { params: RedlineIdParams, response: { 200: Redline } } }, async (req) =>
    presentRedline(await getDraft(req.ctx, 'redline', req.params.redline_id)),
  );
};
