import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { Project } from '../../generated/prisma/client.ts';
import { unixSeconds } from '../../domain/context.ts';
import { archiveProject, createProject, getProject, listProjects } from '../../domain/projects/service.ts';
import { CreateProject, ListProjectsQuery, ProjectIdParams } from '../../domain/projects/schema.ts';
import { ListOf, sendList } from '../list.ts';
import { NullableStr, Unix } from '../response-fields.ts';

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

/** presentProject's answer. */
export const ProjectObject = Type.Object(
  {
    id: Type.String({ description: 'The project id (prj_…).' }),
    object: Type.Literal('svc.project'),
    name: Type.String({ description: 'The project\'s name.' }),
    plan: Type.String({ description: 'The plan, which sets the default rate limits.' }),
    region: NullableStr('The region the project is pinned to, or null: any region.'),
    status: Type.String({ description: 'active or archived.' }),
    created_at: Unix('When the project was created'),
  },
  { description: 'A project.' },
);

export const projectsRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.post('/v1/projects', { config: { action: 'project.create' }, schema: { body: CreateProject, response: { 200: ProjectObject } } }, async (req) => presentProject(await createProject(req.ctx, req.body)));

  app.get('/v1/projects', { config: { action: 'project.list' }, schema: { querystring: ListProjectsQuery, response: { 200: ListOf(ProjectObject) } } }, async (req, reply) =>
    sendList(reply, await listProjects(req.ctx, req.query), '/v1/projects', presentProject),
  );

  app.get('/v1/projects/:project_id', { config: { action: 'project.read' }, schema: { params: ProjectIdParams, response: { 200: ProjectObject } } }, async (req) =>
    presentProject(await getProject(req.ctx, req.params.project_id)),
  );

  app.post('/v1/projects/:project_id/archive', { config: { action: 'project.archive' }, schema: { params: ProjectIdParams, response: { 200: ProjectObject } } }, async (req) =>
    presentProject(await archiveProject(app.ports.projects, req.ctx, req.params.project_id)),
  );
};
