import { Type, type Static } from 'typebox';
import { says } from '../../config/schema-errors.ts';
import { PageQuery } from '../pagination.ts';
import { Input, Name, Nullable, PathId, Region } from '../schema.ts';

export const PLANS = ['starter', 'growth', 'enterprise'] as const;
export type Plan = (typeof PLANS)[number];

/** POST /v1/projects, GraphQL createProject (operator only). */
export const CreateProject = Input({
  name: Name('The project\'s name, 1 to 100 characters.'),
  plan: Type.Optional(
    Nullable(Type.Enum(PLANS), {
      description: 'starter (default), growth or enterprise: the default rate limits (spec 8.1.2).',
      ...says('must be one of starter, growth, enterprise'),
    }),
  ),
  region: Type.Optional(
    Nullable(Region('Where the project\'s inference must run: only providers of this region serve it. null or absent: any region.')),
  ),
});
export type CreateProject = Static<typeof CreateProject>;

/** GET /v1/projects, GraphQL projects. */
export const ListProjectsQuery = PageQuery;

export const ProjectIdParams = PathId('project_id', 'The project\'s id (prj_…).');
