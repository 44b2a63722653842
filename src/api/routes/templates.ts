import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Template, TemplateVersion } from '../../generated/prisma/client.ts';
import { unixSeconds } from '../../domain/context.ts';
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
} from '../../domain/templates/service.ts';
import {
  CreateTemplate,
  ListTemplatesQuery,
  ListVersionsQuery,
  PublishTemplateVersion,
  RenderTemplate,
  TemplateIdParams,
  TemplateVersionParams,
} from '../../domain/templates/schema.ts';
import { ProjectIdFilter } from '../../domain/schema.ts';
import { Type } from 'typebox';
import { ListOf, sendList } from '../list.ts';
import { Int, Json, NullableStr, ObjectType, Str, Unix } from '../response-fields.ts';

/** CONTRACT §10's template object. */
export function presentTemplate(t: Template) {
  return {
    id: t.id,
    object: 'svc.template' as const,
    project_id: t.projectId,
    name: t.name,
    description: t.description,
    latest_version: t.latestVersion,
    created_at: unixSeconds(t.createdAt),
    updated_at: unixSeconds(t.updatedAt),
  };
}

/** CONTRACT §10's version object. */
export function presentTemplateVersion(v: TemplateVersion) {
  return {
    object: 'svc.template_version' as const,
    template_id: v.templateId,
    version: v.version,
    messages: versionMessages(v),
    variables: versionVariables(v),
    model: v.model,
    params: versionParams(v),
    created_at: unixSeconds(v.createdAt),
  };
}

const Template = Type.Object(
  {
    id: Str('The template id (tpl_…).'),
    object: ObjectType('svc.template'),
    project_id: Str('The project it belongs to.'),
    name: Str('Its name, unique in the project.'),
    description: NullableStr('What it is for, or null.'),
    latest_version: Int('The newest published version number.'),
    created_at: Unix('Created'),
    updated_at: Unix('Last published'),
  },
  { description: "CONTRACT §10's template object." },
);

const TemplateVersionBody = Type.Object(
  {
    object: ObjectType('svc.template_version'),
    template_id: Str('The template.'),
    version: Int('The version number, from 1.'),
    messages: Type.Array(Json('A message: role and content, with {{variable}} placeholders.'), { description: 'The messages as published.' }),
    variables: Type.Array(Json('A variable: name, type, required, default.'), { description: 'The variables the messages use.' }),
    model: NullableStr('The model it is written for, or null.'),
    params: Json('Sampling parameters the version sets (temperature, max_tokens…), or null.'),
    created_at: Unix('Published'),
  },
  { description: "CONTRACT §10's version object." },
);

const TemplateRender = Type.Object(
  {
    object: ObjectType('svc.template_render'),
    template_id: Str('The template.'),
    version: Int('The version rendered.'),
    messages: Type.Array(Json('A rendered message: role and content.'), { description: 'The messages with the variables filled in.' }),
  },
  { description: 'A rendered template.' },
);

const ProjectQuery = Type.Object({ project_id: ProjectIdFilter }, { additionalProperties: false });

export const templatesRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.post('/v1/templates', { config: { action: 'template.create' }, schema: { body: CreateTemplate, response: { 200: Template } } }, async (req) =>
    presentTemplate(await createTemplate(app.ports.templates, req.ctx, req.body)),
  );

  app.get('/v1/templates', { config: { action: 'template.list' }, schema: { querystring: ListTemplatesQuery, response: { 200: ListOf(Template) } } }, async (req, reply) =>
    sendList(reply, await listTemplates(req.ctx, req.query), '/v1/templates', presentTemplate),
  );

  app.get('/v1/templates/:template_id', { config: { action: 'template.read' }, schema: { params: TemplateIdParams, querystring: ProjectQuery, response: { 200: Template } } }, async (req) =>
    presentTemplate(await getTemplate(req.ctx, req.params.template_id, req.query.project_id)),
  );

  app.post('/v1/templates/:template_id/versions', { config: { action: 'template.publish' }, schema: { params: TemplateIdParams, body: PublishTemplateVersion, response: { 200: TemplateVersionBody } } }, async (req) =>
    presentTemplateVersion(await publishTemplateVersion(app.ports.templates, req.ctx, req.params.template_id, req.body)),
  );

  app.get('/v1/templates/:template_id/versions', { config: { action: 'template.read' }, schema: { params: TemplateIdParams, querystring: ListVersionsQuery, response: { 200: ListOf(TemplateVersionBody) } } }, async (req, reply) =>
    sendList(
      reply,
      await listTemplateVersions(req.ctx, req.params.template_id, req.query),
      `/v1/templates/${req.params.template_id}/versions`,
      presentTemplateVersion,
    ),
  );

  app.get('/v1/templates/:template_id/versions/:version', { config: { action: 'template.read' }, schema: { params: TemplateVersionParams, querystring: ProjectQuery, response: { 200: TemplateVersionBody } } }, async (req) =>
    presentTemplateVersion(await getTemplateVersion(req.ctx, req.params.template_id, req.params.version, req.query.project_id)),
  );

  app.post('/v1/templates/:template_id/render', { config: { action: 'template.render' }, schema: { params: TemplateIdParams, body: RenderTemplate, response: { 200: TemplateRender } } }, async (req) => {
    const r = await renderTemplate(req.ctx, req.params.template_id, req.body ?? {});
    return { object: 'svc.template_render' as const, template_id: r.templateId, version: r.version, messages: r.messages };
  });
};
