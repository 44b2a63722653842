import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Project } from '../generated/prisma/client.ts';
import { unixSeconds } from '../domain/context.ts';
import { archiveProject, createProject, getProject, listProjects } from '../domain/projects/service.ts';
import { CreateProject, ListProjectsQuery, ProjectIdParams } from '../domain/projects/schema.ts';
import { sendList } from './list.ts';

export function presentProject(p: Project) {
  return {
    id: p.id,
    object: 'svc.project' as const,
    name: p.name,
    plan: p.plan,
    region: p.region,
    status: p.status,
    created_at: unixSeconds(p.createdAt),
  };
}

export const projectsRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.post('/v1/projects', { schema: { body: CreateProject } }, async (req) => presentProject(await createProject(req.ctx, req.body)));

  app.get('/v1/projects', { schema: { querystring: ListProjectsQuery } }, async (req, reply) =>
    sendList(reply, await listProjects(req.ctx, req.query), '/v1/projects', presentProject),
  );

  app.get('/v1/projects/:project_id', { schema: { params: ProjectIdParams } }, async (req) =>
    presentProject(await getProject(req.ctx, req.params.project_id)),
  );

  app.post('/v1/projects/:project_id/archive', { schema: { params: ProjectIdParams } }, async (req) =>
    presentProject(await archiveProject(app.ports.projects, req.ctx, req.params.project_id)),
  );
};
