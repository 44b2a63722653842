import type { Caller } from '../domain/context.ts';
import { getProject } from '../domain/projects/service.ts';
import { builder } from './builder.ts';
import { ProjectRef } from './projects.ts';

const Viewer = builder.objectRef<Caller>('Viewer').implement({
  description: 'The key making the request: what X-Svc-Key-Id, X-Svc-Project and X-Svc-Scopes say.',
  fields: (t) => ({
    kind: t.exposeString('kind', { description: 'operator (SVC_MASTER_KEY) or key.' }),
    keyId: t.exposeID('keyId', { description: 'key_master for the operator.' }),
    projectId: t.exposeID('projectId', { nullable: true, description: 'null for the operator.' }),
    scopes: t.stringList({ resolve: (caller) => [...caller.scopes] }),
    project: t.field({
      type: ProjectRef,
      nullable: true,
      resolve: (caller, _args, { ctx }) => (caller.projectId ? getProject(ctx, caller.projectId) : null),
    }),
  }),
});

builder.queryField('viewer', (t) => t.field({ type: Viewer, resolve: (_root, _args, { ctx }) => ctx.caller }));
