import type { FastifyPluginAsync } from 'fastify';
import type { Project } from '../generated/prisma/client.ts';
import { unixSeconds } from '../domain/context.ts';
import { archiveProject, createProject, getProject, listProjects, type CreateProjectInput } from '../domain/projects/service.ts';
import type { PageQuery } from '../domain/pagination.ts';
import { pageQueryProperties, sendList } from './list.ts';

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

const ProjectIdParams = {
  type: 'object',
  properties: { project_id: { type: 'string' } },
  required: ['project_id'],
} as const;

export const projectsRoutes: FastifyPluginAsync = async (app) => {
  app.post<{ Body: CreateProjectInput }>(
    '/v1/projects',
    {
      schema: {
        body: {
          type: 'object',
          additionalProperties: false,
          required: ['name'],
          properties: {
            name: { type: 'string' },
            plan: { type: ['string', 'null'] }, // null: the default plan, as GraphQL's createProject reads it
            region: { type: ['string', 'null'] },
          },
        },
      },
    },
    async (req) => presentProject(await createProject(req.ctx, req.body)),
  );

  app.get<{ Querystring: PageQuery }>(
    '/v1/projects',
    { schema: { querystring: { type: 'object', additionalProperties: false, properties: pageQueryProperties } } },
    async (req, reply) => sendList(reply, await listProjects(req.ctx, req.query), '/v1/projects', presentProject),
  );

  app.get<{ Params: { project_id: string } }>('/v1/projects/:project_id', { schema: { params: ProjectIdParams } }, async (req) =>
    presentProject(await getProject(req.ctx, req.params.project_id)),
  );

  app.post<{ Params: { project_id: string } }>(
    '/v1/projects/:project_id/archive',
    { schema: { params: ProjectIdParams } },
    async (req) => presentProject(await archiveProject(app.ports.projects, req.ctx, req.params.project_id)),
  );
};
