import { archiveProject, createProject, getProject, listProjects } from '../domain/projects/service.ts';
import { builder } from './builder.ts';
import { serviceConnection } from './connections.ts';
import { inputTypeFrom, serviceInput } from './inputs.ts';
import { CreateProject } from '../domain/projects/schema.ts';

export const ProjectRef = builder.prismaObject('Project', {
  fields: (t) => ({
    id: t.exposeID('id'),
    name: t.exposeString('name'),
    plan: t.exposeString('plan', { description: 'starter, growth or enterprise.' }),
    region: t.exposeString('region', { nullable: true }),
    status: t.exposeString('status', { description: 'active or archived.' }),
    createdAt: t.expose('createdAt', { type: 'UnixSeconds' }),
  }),
});

const CreateProjectInput = inputTypeFrom('CreateProjectInput', CreateProject);

// Any valid key, as on REST (domain/auth/actions.ts): a key sees its own project, the operator all; the service decides.
builder.queryFields((t) => ({
  project: t.field({
    type: ProjectRef,
    nullable: true,
    authScopes: { action: 'project.read' },
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, args, { ctx }) => getProject(ctx, String(args.id)),
  }),
  projects: t.connection(
    {
      type: ProjectRef,
      nullable: true,
      authScopes: { action: 'project.list' },
      resolve: (_root, args, { ctx }) => serviceConnection(args, (query) => listProjects(ctx, query)),
    },
    { name: 'ProjectConnection' },
    { name: 'ProjectEdge' },
  ),
}));

builder.mutationFields((t) => ({
  createProject: t.field({
    type: ProjectRef,
    nullable: true,
    authScopes: { action: 'project.create' },
    description: 'Operator only (403 insufficient_scope for a project key). Audits project.create.',
    args: { input: t.arg({ type: CreateProjectInput, required: true }) },
    resolve: (_root, { input }, { ctx }) => createProject(ctx, serviceInput(input)),
  }),
  archiveProject: t.field({
    type: ProjectRef,
    nullable: true,
    authScopes: { action: 'project.archive' },
    description: 'Operator only. Archiving twice returns the same project. Audits project.archive.',
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, args, { ctx, ports }) => archiveProject(ports.projects, ctx, String(args.id)),
  }),
}));
