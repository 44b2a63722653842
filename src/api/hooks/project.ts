import type { FastifyInstance } from 'fastify';
import { assertOneNamedProject, readProjectNames } from '../../domain/tenancy.ts';

/**
 * The project a request names, read once (CONTRACT §2, §3): before validation, so that the idempotency hook (also
 * preValidation, registered after this) scopes its key by it; frozen into `ctx.project`, which tenancy, idempotency
 * and governance read. REST names it in the query or body `project_id` and X-Svc-Project; /graphql in the header only
 * (its fields name theirs as arguments). A multipart form is read by its handler, after the hooks: its fields are the
 * service's arguments.
 */
export function registerProjectNames(app: FastifyInstance): void {
  app.addHook('preValidation', (req, _reply, done) => {
    if (req.ctx) {
      const rest = req.url.startsWith('/v1/');
      req.ctx.project = readProjectNames(rest ? req.query : null, rest ? req.body : null, req.headers['x-svc-project']);
    }
    done();
  });

  // Once the request is valid (a 400 for its fields comes first): the query and the body must name the same project.
  app.addHook('preHandler', (req, _reply, done) => {
    if (req.ctx) assertOneNamedProject(req.ctx.project);
    done();
  });
}
