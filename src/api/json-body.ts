import type { FastifyInstance } from 'fastify';

/**
 * The application/json parser of a fastify scope: an empty body is no body (curl -X POST on revoke), and a body that
 * is not JSON is handed to `invalid`, which decides how that scope answers it (REST: an error; GraphQL: a request
 * error in errors[]).
 */
export function parseJsonBodies(app: FastifyInstance, invalid: () => { error: Error } | { value: unknown }): void {
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, body, done) => {
    const text = (body as string).trim();
    if (text === '') return done(null, undefined);
    try {
      done(null, JSON.parse(text));
    } catch {
      const answer = invalid();
      if ('error' in answer) done(answer.error, undefined);
      else done(null, answer.value);
    }
  });
}
