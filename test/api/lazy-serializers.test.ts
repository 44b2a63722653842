import { describe, expect, it } from 'vitest';
import { lazySerializers } from '../../src/api/app.ts';

/** Response serializers compiled on a route's first answer (api/app.ts), or as declared under SVC_CHECK_RESPONSES. */
describe('response serializers', () => {
  const route = (schema: unknown) => ({ schema, method: 'GET', url: '/v1/things', httpStatus: '200' });
  const thing = { type: 'object', properties: { id: { type: 'string' }, n: { type: 'integer' } } };
  const broken = { type: 'object', properties: { id: { $ref: '#/definitions/missing' } } };

  it('writes what fast-json-stringify writes: the schema fields, in its order', () => {
    const write = lazySerializers()({}, {})(route(thing));
    expect(write({ n: 2, id: 'a', secret: 'x' })).toBe('{"id":"a","n":2}');
    expect(write({ id: 'b', n: 3 })).toBe('{"id":"b","n":3}');
  });

  it('compiles on first use: a schema it cannot compile fails that answer, not the declaration', () => {
    const write = lazySerializers()({}, {})(route(broken));
    expect(() => write({ id: 'a' })).toThrow(/missing/);
  });

  it('compiles as declared when eager (the test suite), so a bad schema fails the start', () => {
    expect(() => lazySerializers(true)({}, {})(route(broken))).toThrow(/missing/);
    expect(lazySerializers(true)({}, {})(route(thing))({ id: 'c', n: 1 })).toBe('{"id":"c","n":1}');
  });
});
