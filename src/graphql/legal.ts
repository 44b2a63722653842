import type { LegalDraft, LegalMatter } from '../generated/prisma/client.ts';
import type { MappedField, RedlineEdit } from '../domain/legal/checks.ts';
import {
  closeMatter,
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
import { CreateContract, CreateMatter, RequestMapping, RequestRedline, UpdateMatter } from '../domain/legal/schema.ts';
import { builder } from './builder.ts';
import { serviceConnection } from './connections.ts';
import { inputTypeFrom, listFilters, serviceInput } from './inputs.ts';

const MappedFieldRef = builder.objectRef<MappedField>('LegalMappedField').implement({
  description: 'A requested field of a mapping: the model\'s value and quote, the quote looked up in the contract text by the gateway.',
  fields: (t) => ({
    name: t.exposeString('name'),
    description: t.exposeString('description', { nullable: true }),
    value: t.exposeString('value', { nullable: true }),
    quote: t.exposeString('quote', { nullable: true }),
    found: t.exposeBoolean('found', { nullable: true, description: 'Whether the model says the contract states it; null before completion.' }),
    quoteVerified: t.field({
      type: 'Boolean',
      nullable: true,
      description: 'true: the quote occurs in the contract; false: it does not (flagged), or a found field has no quote; null: nothing to check.',
      resolve: (f) => f.quote_verified,
    }),
    quoteStart: t.field({ type: 'Int', nullable: true, description: 'Where the verified quote starts in the contract text.', resolve: (f) => f.quote_start }),
  }),
});

const RedlineEditRef = builder.objectRef<RedlineEdit>('LegalRedlineEdit').implement({
  description: "One of the model's proposed edits, located in the contract text and applied (or not) by the gateway.",
  fields: (t) => ({
    original: t.exposeString('original'),
    proposed: t.exposeString('proposed'),
    rationale: t.exposeString('rationale'),
    applied: t.exposeBoolean('applied'),
    notApplied: t.field({
      type: 'String',
      nullable: true,
      description: 'original_not_found, overlaps_another_edit or no_change; null when applied.',
      resolve: (e) => e.not_applied,
    }),
    start: t.exposeInt('start', { nullable: true }),
    occurrences: t.exposeInt('occurrences'),
  }),
});

type Types = typeof builder extends PothosSchemaTypes.SchemaBuilder<infer T> ? T : never;

function draftFields(t: PothosSchemaTypes.ObjectFieldBuilder<Types, LegalDraft>) {
  return {
    id: t.exposeID('id'),
    projectId: t.exposeID('projectId'),
    matterId: t.exposeID('matterId'),
    contractId: t.exposeID('contractId'),
    status: t.exposeString('status', { description: 'queued, running, completed or failed.' }),
    instructions: t.field({ type: 'String', nullable: true, resolve: (d) => draftParams(d).instructions ?? null }),
    error: t.field({ type: 'JSON', nullable: true, resolve: (d) => d.error ?? null }),
    createdBy: t.exposeString('createdBy'),
    createdAt: t.expose('createdAt', { type: 'UnixSeconds' }),
    completedAt: t.expose('completedAt', { type: 'UnixSeconds', nullable: true }),
  };
}

const MappingRef = builder.objectRef<LegalDraft>('LegalMapping').implement({
  description: 'A contract mapped into named fields by the model (asynchronous), each quote checked against the text.',
  fields: (t) => ({
    ...draftFields(t),
    fields: t.field({ type: [MappedFieldRef], resolve: (d) => mappingFields(d).fields }),
    flaggedQuotes: t.field({
      type: 'Int',
      nullable: true,
      description: 'Fields whose quote is not in the contract (quoteVerified false); null before completion.',
      resolve: (d) => mappingFields(d).flaggedQuotes,
    }),
  }),
});

const RedlineRef = builder.objectRef<LegalDraft>('LegalRedline').implement({
  description: "Proposed edits to a contract by the model (asynchronous), and the gateway's unified diff of them.",
  fields: (t) => ({
    ...draftFields(t),
    playbook: t.field({ type: 'String', nullable: true, resolve: (d) => draftParams(d).playbook ?? null }),
    summary: t.field({ type: 'String', nullable: true, resolve: (d) => redlineResult(d)?.summary ?? null }),
    edits: t.field({ type: [RedlineEditRef], nullable: true, resolve: (d) => redlineResult(d)?.edits ?? null }),
    unappliedEdits: t.field({ type: 'Int', nullable: true, resolve: (d) => redlineResult(d)?.unapplied_edits ?? null }),
    diff: t.exposeString('diff', { nullable: true, description: 'The unified diff of the contract text with the applied edits (empty: none applied).' }),
  }),
});

const ContractRef = builder.objectRef<LegalContract>('LegalContract').implement({
  description: 'A contract of a matter: its text is extracted at upload and fixed (SHA-256 shown).',
  fields: (t) => ({
    id: t.exposeID('id'),
    projectId: t.exposeID('projectId'),
    matterId: t.exposeID('matterId'),
    name: t.exposeString('name'),
    contentType: t.exposeString('contentType'),
    bytes: t.exposeInt('bytes'),
    characters: t.exposeInt('characters'),
    sha256: t.exposeString('sha256'),
    createdBy: t.exposeString('createdBy'),
    createdAt: t.expose('createdAt', { type: 'UnixSeconds' }),
    text: t.field({
      type: 'String',
      authScopes: { action: 'legal_contract.read' },
      description: 'The extracted text (as GET /v1/legal/contracts/{id}/text).',
      resolve: async (c, _args, { ctx }) => (await getContractText(ctx, c.id)).text,
    }),
    mappings: t.connection(
      {
        type: MappingRef,
        authScopes: { action: 'legal_mapping.list' },
        resolve: (c, args, { ctx }) => serviceConnection(args, (query) => listDrafts(ctx, 'mapping', c.id, query)),
      },
      { name: 'LegalMappingConnection' },
      { name: 'LegalMappingEdge' },
    ),
    redlines: t.connection(
      {
        type: RedlineRef,
        authScopes: { action: 'legal_redline.list' },
        resolve: (c, args, { ctx }) => serviceConnection(args, (query) => listDrafts(ctx, 'redline', c.id, query)),
      },
      { name: 'LegalRedlineConnection' },
      { name: 'LegalRedlineEdge' },
    ),
  }),
});

const MatterRef = builder.objectRef<LegalMatter>('LegalMatter').implement({
  description: 'A Legal matter: open, then closed (closed, it takes no more writes: matter_closed).',
  fields: (t) => ({
    id: t.exposeID('id'),
    projectId: t.exposeID('projectId'),
    name: t.exposeString('name'),
    client: t.exposeString('client', { nullable: true }),
    description: t.exposeString('description', { nullable: true }),
    status: t.exposeString('status', { description: 'open or closed.' }),
    closedAt: t.expose('closedAt', { type: 'UnixSeconds', nullable: true }),
    closedBy: t.exposeString('closedBy', { nullable: true }),
    closeReason: t.exposeString('closeReason', { nullable: true }),
    createdAt: t.expose('createdAt', { type: 'UnixSeconds' }),
    updatedAt: t.expose('updatedAt', { type: 'UnixSeconds' }),
    contracts: t.connection(
      {
        type: ContractRef,
        authScopes: { action: 'legal_contract.list' },
        resolve: (m, args, { ctx }) => serviceConnection(args, (query) => listContracts(ctx, m.id, query)),
      },
      { name: 'LegalContractConnection' },
      { name: 'LegalContractEdge' },
    ),
  }),
});

const CreateLegalMatterInput = inputTypeFrom('CreateLegalMatterInput', CreateMatter);
const UpdateLegalMatterInput = inputTypeFrom('UpdateLegalMatterInput', UpdateMatter);
const CreateLegalContractInput = inputTypeFrom('CreateLegalContractInput', CreateContract, {
  description: 'The contract as text (files, PDF included: REST multipart).',
});
const RequestLegalMappingInput = inputTypeFrom('RequestLegalMappingInput', RequestMapping, { lists: { fields: 'LegalMappingFieldInput' } });
const RequestLegalRedlineInput = inputTypeFrom('RequestLegalRedlineInput', RequestRedline);

builder.queryFields((t) => ({
  legalMatters: t.connection(
    {
      type: MatterRef,
      nullable: true,
      authScopes: { action: 'legal_matter.list' },
      description: 'Newest first, as GET /v1/legal/matters.',
      args: { projectId: t.arg.id(), status: t.arg.string() },
      resolve: (_root, args, { ctx }) => serviceConnection(args, (query) => listMatters(ctx, { ...query, ...listFilters(args) })),
    },
    { name: 'LegalMatterConnection' },
    { name: 'LegalMatterEdge' },
  ),
  legalMatter: t.field({
    type: MatterRef,
    nullable: true,
    authScopes: { action: 'legal_matter.read' },
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, args, { ctx }) => getMatter(ctx, String(args.id)),
  }),
  legalContract: t.field({
    type: ContractRef,
    nullable: true,
    authScopes: { action: 'legal_contract.read' },
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, args, { ctx }) => getContract(ctx, String(args.id)),
  }),
  legalMapping: t.field({
    type: MappingRef,
    nullable: true,
    authScopes: { action: 'legal_mapping.read' },
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, args, { ctx }) => getDraft(ctx, 'mapping', String(args.id)),
  }),
  legalRedline: t.field({
    type: RedlineRef,
    nullable: true,
    authScopes: { action: 'legal_redline.read' },
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, args, { ctx }) => getDraft(ctx, 'redline', String(args.id)),
  }),
}));

builder.mutationFields((t) => ({
  createLegalMatter: t.field({
    type: MatterRef,
    nullable: true,
    authScopes: { action: 'legal_matter.create' },
    description: 'Audits legal_matter.create.',
    args: { input: t.arg({ type: CreateLegalMatterInput, required: true }) },
    resolve: (_root, { input }, { ctx }) => createMatter(ctx, serviceInput(input)),
  }),
  updateLegalMatter: t.field({
    type: MatterRef,
    nullable: true,
    authScopes: { action: 'legal_matter.update' },
    description: 'Only while open (matter_closed). Audits legal_matter.update.',
    args: { id: t.arg.id({ required: true }), input: t.arg({ type: UpdateLegalMatterInput, required: true }) },
    resolve: (_root, { id, input }, { ctx }) => updateMatter(ctx, String(id), serviceInput(input)),
  }),
  closeLegalMatter: t.field({
    type: MatterRef,
    nullable: true,
    authScopes: { action: 'legal_matter.close' },
    description: 'From then on every write under the matter is matter_closed; closing again returns it unchanged. Audits legal_matter.close.',
    args: { id: t.arg.id({ required: true }), reason: t.arg.string() },
    resolve: (_root, { id, ...input }, { ctx }) => closeMatter(ctx, String(id), listFilters(input)),
  }),
  createLegalContract: t.field({
    type: ContractRef,
    nullable: true,
    authScopes: { action: 'legal_contract.create' },
    description: "Over the plan's document limit: document_too_large (param content); under a closed matter: matter_closed. Audits legal_contract.create.",
    args: { matterId: t.arg.id({ required: true }), input: t.arg({ type: CreateLegalContractInput, required: true }) },
    resolve: (_root, { matterId, input }, { ctx }) => createContractJson(ctx, String(matterId), serviceInput(input)),
  }),
  requestLegalMapping: t.field({
    type: MappingRef,
    nullable: true,
    authScopes: { action: 'legal_mapping.create' },
    description: 'Queued model work (also needs inference:write); the background worker maps the contract and checks each quote. Audits legal_mapping.create.',
    args: { contractId: t.arg.id({ required: true }), input: t.arg({ type: RequestLegalMappingInput, required: true }) },
    resolve: (_root, { contractId, input }, { ctx }) => requestMapping(ctx, String(contractId), serviceInput(input)),
  }),
  requestLegalRedline: t.field({
    type: RedlineRef,
    nullable: true,
    authScopes: { action: 'legal_redline.create' },
    description: 'Queued model work (also needs inference:write): edits against a playbook and/or instructions, and their diff. Audits legal_redline.create.',
    args: { contractId: t.arg.id({ required: true }), input: t.arg({ type: RequestLegalRedlineInput, required: true }) },
    resolve: (_root, { contractId, input }, { ctx }) => requestRedline(ctx, String(contractId), serviceInput(input)),
  }),
}));
