import {
  createTemplate,
  getTemplate,
  getTemplateVersion,
  listTemplates,
  listTemplateVersions,
  publishTemplateVersion,
  renderTemplate,
  versionMessages,
  versionParams,
  versionVariables,
} from '../domain/templates/service.ts';
import type { Variable } from '../domain/templates/render.ts';
import type { TemplateMessage } from '../domain/templates/schema.ts';
import { builder } from './builder.ts';
import { serviceConnection } from './connections.ts';
import { listFilters, serviceInput } from './inputs.ts';

/** CONTRACT §10 on GraphQL: the same services as api/routes/templates.ts, REST's objects with camelCase names. */

const TemplateMessageRef = builder.objectRef<TemplateMessage>('TemplateMessage').implement({
  fields: (t) => ({
    role: t.exposeString('role', { description: 'system, developer, user or assistant.' }),
    content: t.exposeString('content', { description: 'Mustache text ({{variable}}, no HTML escaping).' }),
  }),
});

const TemplateVariableRef = builder.objectRef<Variable>('TemplateVariable').implement({
  fields: (t) => ({
    name: t.exposeString('name'),
    required: t.exposeBoolean('required'),
    default: t.field({ type: 'JSON', nullable: true, description: 'null when the variable has none.', resolve: (v) => v.default ?? null }),
  }),
});

export const TemplateRef = builder.prismaObject('Template', {
  description: 'A prompt template (tpl_…); its content is in its immutable versions.',
  fields: (t) => ({
    id: t.exposeID('id'),
    projectId: t.exposeID('projectId'),
    name: t.exposeString('name'),
    description: t.exposeString('description', { nullable: true }),
    latestVersion: t.exposeInt('latestVersion'),
    createdAt: t.expose('createdAt', { type: 'UnixSeconds' }),
    updatedAt: t.expose('updatedAt', { type: 'UnixSeconds' }),
  }),
});

export const TemplateVersionRef = builder.prismaObject('TemplateVersion', {
  description: 'One published version of a template: never changed once published.',
  fields: (t) => ({
    templateId: t.exposeID('templateId'),
    version: t.exposeInt('version'),
    messages: t.field({ type: [TemplateMessageRef], resolve: (v) => versionMessages(v) }),
    variables: t.field({ type: [TemplateVariableRef], resolve: (v) => versionVariables(v) }),
    model: t.exposeString('model', { nullable: true }),
    params: t.field({ type: 'JSON', nullable: true, description: 'temperature, top_p, max_tokens, …', resolve: (v) => versionParams(v) }),
    createdAt: t.expose('createdAt', { type: 'UnixSeconds' }),
  }),
});

const RenderedTemplateRef = builder
  .objectRef<{ templateId: string; version: number; messages: TemplateMessage[] }>('RenderedTemplate')
  .implement({
    fields: (t) => ({
      templateId: t.exposeID('templateId'),
      version: t.exposeInt('version'),
      messages: t.field({ type: [TemplateMessageRef], resolve: (r) => r.messages }),
    }),
  });

const TemplateMessageInput = builder.inputType('TemplateMessageInput', {
  fields: (t) => ({ role: t.string({ required: true }), content: t.string({ required: true }) }),
});
const TemplateVariableInput = builder.inputType('TemplateVariableInput', {
  fields: (t) => ({
    name: t.string({ required: true }),
    required: t.boolean({ description: 'Default true.' }),
    default: t.field({ type: 'JSON' }),
  }),
});
const versionFields = {
  messages: (t: any) => t.field({ type: [TemplateMessageInput], required: true }),
  variables: (t: any) => t.field({ type: [TemplateVariableInput] }),
  model: (t: any) => t.string(),
  params: (t: any) => t.field({ type: 'JSON', description: 'temperature, top_p, max_tokens, presence_penalty, frequency_penalty, seed, stop.' }),
};
const CreateTemplateInput = builder.inputType('CreateTemplateInput', {
  fields: (t) => ({
    projectId: t.id(),
    name: t.string({ required: true }),
    description: t.string(),
    messages: versionFields.messages(t),
    variables: versionFields.variables(t),
    model: versionFields.model(t),
    params: versionFields.params(t),
  }),
});
const PublishTemplateVersionInput = builder.inputType('PublishTemplateVersionInput', {
  fields: (t) => ({
    version: t.int({ description: 'Default: the latest + 1.' }),
    messages: versionFields.messages(t),
    variables: versionFields.variables(t),
    model: versionFields.model(t),
    params: versionFields.params(t),
  }),
});

/** GraphQL's omitted optional fields arrive as absent or null; the schema treats a null variable list as absent. */
const withoutNulls = (input: object) => Object.fromEntries(Object.entries(serviceInput(input) as object).filter(([, v]) => v !== null));

builder.queryFields((t) => ({
  templates: t.connection(
    {
      type: TemplateRef,
      nullable: true,
      authScopes: { action: 'template.list' },
      description: 'Newest first (cursor: the template id).',
      args: { projectId: t.arg.id() },
      resolve: (_root, args, { ctx }) => serviceConnection(args, (query) => listTemplates(ctx, { ...query, ...listFilters(args) })),
    },
    { name: 'TemplateConnection' },
    { name: 'TemplateEdge' },
  ),
  template: t.field({
    type: TemplateRef,
    nullable: true,
    authScopes: { action: 'template.read' },
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, args, { ctx }) => getTemplate(ctx, String(args.id)),
  }),
  templateVersions: t.connection(
    {
      type: TemplateVersionRef,
      nullable: true,
      authScopes: { action: 'template.read' },
      description: 'Newest first (cursor: the version number).',
      args: { templateId: t.arg.id({ required: true }) },
      resolve: (_root, args, { ctx }) =>
        serviceConnection(
          args,
          (query) =>
            listTemplateVersions(ctx, String(args.templateId), {
              ...(query.limit !== undefined ? { limit: query.limit } : {}),
              ...(query.starting_after !== undefined ? { starting_after: Number(query.starting_after) } : {}),
              ...(query.ending_before !== undefined ? { ending_before: Number(query.ending_before) } : {}),
            }),
          (v) => String(v.version),
        ),
    },
    { name: 'TemplateVersionConnection' },
    { name: 'TemplateVersionEdge' },
  ),
  templateVersion: t.field({
    type: TemplateVersionRef,
    nullable: true,
    authScopes: { action: 'template.read' },
    args: { templateId: t.arg.id({ required: true }), version: t.arg.int({ required: true }) },
    resolve: (_root, args, { ctx }) => getTemplateVersion(ctx, String(args.templateId), args.version),
  }),
}));

builder.mutationFields((t) => ({
  createTemplate: t.field({
    type: TemplateRef,
    nullable: true,
    authScopes: { action: 'template.create' },
    description: 'Creates the template and publishes version 1. Audits template.create.',
    args: { input: t.arg({ type: CreateTemplateInput, required: true }) },
    resolve: (_root, { input }, { ctx, ports }) => createTemplate(ports.templates, ctx, withoutNulls(input)),
  }),
  publishTemplateVersion: t.field({
    type: TemplateVersionRef,
    nullable: true,
    authScopes: { action: 'template.publish' },
    description: 'An existing version number is template_version_conflict. Audits template.publish.',
    args: { templateId: t.arg.id({ required: true }), input: t.arg({ type: PublishTemplateVersionInput, required: true }) },
    resolve: (_root, { templateId, input }, { ctx, ports }) => publishTemplateVersion(ports.templates, ctx, String(templateId), withoutNulls(input)),
  }),
  renderTemplate: t.field({
    type: RenderedTemplateRef,
    nullable: true,
    authScopes: { action: 'template.render' },
    description: 'The messages with the variables filled in; a required variable absent is template_variable_missing.',
    args: { templateId: t.arg.id({ required: true }), version: t.arg.int(), variables: t.arg({ type: 'JSON' }) },
    resolve: (_root, args, { ctx }) =>
      renderTemplate(ctx, String(args.templateId), {
        ...(args.version != null ? { version: args.version } : {}),
        ...(args.variables != null ? { variables: args.variables } : {}),
      }),
  }),
}));
