import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Template, TemplateVersion } from '../generated/prisma/client.ts';
import { unixSeconds } from '../domain/context.ts';
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
import {
  CreateTemplate,
  ListTemplatesQuery,
  ListVersionsQuery,
  PublishTemplateVersion,
  RenderTemplate,
  TemplateIdParams,
  TemplateVersionParams,
} from '../domain/templates/schema.ts';
import { ProjectIdFilter } from '../domain/schema.ts';
import { Type } from 'typebox';
import { sendList } from './list.ts';

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

const ProjectQuery = Type.Object({ project_id: ProjectIdFilter }, { additionalProperties: false });

export const templatesRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.post('/v1/templates', { schema: { body: CreateTemplate } }, async (req) =>
    presentTemplate(await createTemplate(app.ports.templates, req.ctx, req.body)),
  );

  app.get('/v1/templates', { schema: { querystring: ListTemplatesQuery } }, async (req, reply) =>
    sendList(reply, await listTemplates(req.ctx, req.query), '/v1/templates', presentTemplate),
  );

  app.get('/v1/templates/:template_id', { schema: { params: TemplateIdParams, querystring: ProjectQuery } }, async (req) =>
    presentTemplate(await getTemplate(req.ctx, req.params.template_id, req.query.project_id)),
  );

  app.post('/v1/templates/:template_id/versions', { schema: { params: TemplateIdParams, body: PublishTemplateVersion } }, async (req) =>
    presentTemplateVersion(await publishTemplateVersion(app.ports.templates, req.ctx, req.params.template_id, req.body)),
  );

  app.get('/v1/templates/:template_id/versions', { schema: { params: TemplateIdParams, querystring: ListVersionsQuery } }, async (req, reply) =>
    sendList(
      reply,
      await listTemplateVersions(req.ctx, req.params.template_id, req.query),
      `/v1/templates/${req.params.template_id}/versions`,
      presentTemplateVersion,
    ),
  );

  app.get('/v1/templates/:template_id/versions/:version', { schema: { params: TemplateVersionParams, querystring: ProjectQuery } }, async (req) =>
    presentTemplateVersion(await getTemplateVersion(req.ctx, req.params.template_id, req.params.version, req.query.project_id)),
  );

  app.post('/v1/templates/:template_id/render', { schema: { params: TemplateIdParams, body: RenderTemplate } }, async (req) => {
    const r = await renderTemplate(req.ctx, req.params.template_id, req.body ?? {});
    return { object: 'svc.template_render' as const, template_id: r.templateId, version: r.version, messages: r.messages };
  });
};
