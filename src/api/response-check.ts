import { isDeepStrictEqual } from 'node:util';
import type { FastifyInstance } from 'fastify';

/**
 * SVC_CHECK_RESPONSES (the test suite's guard): a route's response schema makes fastify serialize its answer with
 * fast-json-stringify, which leaves out a field the schema does not name and coerces one of another type. With the
 * check on, each such answer is serialized both ways and must come out byte for byte the same (key order included);
 * otherwise the request fails with a 500 whose log names the route and the first difference. Off in production.
 */
export function registerResponseCheck(app: FastifyInstance): void {
  app.addHook('preSerialization', (req, reply, payload, done) => {
    const schemas = req.routeOptions.schema?.response as Record<string, unknown> | undefined;
    if (!schemas || payload === null || typeof payload !== 'object') return done(null, payload);
    const status = reply.statusCode;
    const key = [String(status), `${String(status)[0]}xx`, 'default'].find((k) => k in schemas);
    if (!key) return done(null, payload);
    const expected = JSON.stringify(payload);
    let actual: string;
    try {
      actual = reply.serializeInput(payload as Record<string, unknown>, key) as string;
    } catch {
      return done(null, payload); // a schema per content type: not checked here
    }
    if (actual === expected) return done(null, payload);
    const detail = isDeepStrictEqual(JSON.parse(actual), JSON.parse(expected)) ? 'key order differs' : firstDifference(JSON.parse(expected), JSON.parse(actual), '$');
    done(new Error(`The response schema of ${req.routeOptions.method} ${req.routeOptions.url} (${key}) does not serialize the answer as it is: ${detail}`));
  });
}

function firstDifference(expected: unknown, actual: unknown, path: string): string {
  if (expected && actual && typeof expected === 'object' && typeof actual === 'object') {
    const keys = new Set([...Object.keys(expected), ...Object.keys(actual)]);
    for (const k of keys) {
      const a = (expected as Record<string, unknown>)[k];
      const b = (actual as Record<string, unknown>)[k];
      if (!isDeepStrictEqual(a, b)) return firstDifference(a, b, `${path}.${k}`);
    }
  }
  return `${path}: the answer has ${JSON.stringify(expected)?.slice(0, 120)}, the schema writes ${JSON.stringify(actual)?.slice(0, 120)}`;
}
