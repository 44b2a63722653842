/**
 * The import rule (docs/ARCHITECTURE.md), checked in CI by `npm run check:imports`:
 *   api, graphql         ->  domain  ->  db, limits, providers, pubsub, errors, config, kernel
 *   jobs                 ->  domain (and the layers below it); nothing imports jobs but the composition root
 *   redis                ->  domain (the ports its adapters implement) and the layers below it; the domain and the
 *                            layers below it never import redis (they reach Redis through ports the root wires)
 * and no import circles anywhere in src/, the admin console (src/admin) included; the console imports no server code
 * (it reads the server's tables from the API: GET /v1/catalog, GraphQL `catalog`).
 */
const LOWER = '^src/(db|limits|providers|pubsub|errors|config|kernel)/';
module.exports = {
  forbidden: [
    { name: 'no-circular', severity: 'error', comment: 'An import circle: break it with a port or by moving the shared piece down.',
      from: { path: '^src/' }, to: { circular: true } },
    { name: 'lower-layers-do-not-import-up', severity: 'error',
      comment: 'Modules below the domain take what they need as parameters (a Clock, a callback), never from domain/, jobs/ or the adapters.',
      from: { path: LOWER }, to: { path: '^src/(domain|jobs|graphql|admin|api|redis)/' } },
    { name: 'domain-does-not-import-adapters-or-jobs', severity: 'error',
      comment: 'The domain names ports; jobs and adapters implement or call them.',
      from: { path: '^src/domain/' }, to: { path: '^src/(jobs|graphql|admin|api|redis)/' } },
    { name: 'redis-adapters-do-not-import-up', severity: 'error',
      comment: 'src/redis (the connection, its health state, the batch script and the Redis adapters of the domain\'s ports) sits beside jobs/: it may import domain/ and the layers below it, never the request layers, jobs or observability.',
      from: { path: '^src/redis/' }, to: { path: '^src/(jobs|graphql|admin|api|observability)/' } },
    { name: 'console-does-not-import-the-server', severity: 'error',
      comment: 'src/admin is a browser app built apart (its own tsconfig): what it needs of the server it reads from the API (the swc parser cannot tell a type-only import, so none at all).',
      from: { path: '^src/admin/' }, to: { path: '^src/(?!admin/)' } },
    { name: 'observability-is-reached-through-ports', severity: 'error',
      comment: 'Metrics and traces (src/observability) watch through hook points the composition root wires (RouterOptions.hops, the outcome sink, fastify hooks); the domain and the layers below it never import them.',
      from: { path: '^src/(domain|db|limits|providers|pubsub|errors|config|kernel)/' }, to: { path: '^src/observability/' } },
    { name: 'jobs-are-not-imported-by-the-request-layers', severity: 'error',
      from: { path: '^src/(api|graphql)/' }, to: { path: '^src/jobs/' } },
    { name: 'routes-do-not-import-graphql', severity: 'error',
      comment: 'The REST routes and the GraphQL adapters are twins over the same services: neither imports the other (the app mounts /graphql).',
      from: { path: '^src/api/(?!app\\.ts$)' }, to: { path: '^src/graphql/' } },
    { name: 'graphql-does-not-import-routes', severity: 'error',
      comment: 'GraphQL shares the edge\'s hooks and error shape (src/api/hooks, error-body), never a REST route.',
      from: { path: '^src/graphql/' }, to: { path: '^src/api/routes/' } },
    { name: 'domain-does-not-import-frameworks', severity: 'error',
      from: { path: '^src/domain/' }, to: { path: 'node_modules/(fastify|graphql-yoga|@pothos)' } },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^src/generated/' },
    tsConfig: { fileName: 'tsconfig.json' },
    tsPreCompilationDeps: true,
    // TypeScript 7 has no JavaScript compiler API: swc parses the sources.
    parser: 'swc',
    enhancedResolveOptions: { extensions: ['.ts', '.js'] },
  },
};
