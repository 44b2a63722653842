// Prints the OpenAPI document the gateway serves at /openapi.json (generated from the route schemas by
// @fastify/swagger) to openapi.json at the repository root.
//   npm run openapi:print   rewrite openapi.json
//   npm run openapi:check   exit 1 when the committed openapi.json differs from what the routes generate (CI)
//   --file <path>          another file than openapi.json (tests)
// The app is built on an empty in-memory embedded database with the built-in mock provider and no environment of its own, so
// the document depends on the code only (paths sorted: see observability/openapi.ts).
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pino from 'pino';
import { closeDeps, createDeps } from '../src/app-deps.ts';
import { loadConfig } from '../src/config/config.ts';
import { openDatabase } from '../src/db/client.ts';
import { buildApp } from '../src/api/app.ts';
import { printOpenApi } from '../src/observability/openapi.ts';

const fileArg = process.argv.indexOf('--file');
const target =
  fileArg > 0 && process.argv[fileArg + 1]
    ? path.resolve(process.argv[fileArg + 1]!)
    : path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'openapi.json');

async function generate(): Promise<string> {
  // Nothing is queried while the app is built (the operator key is given): an empty in-memory database will do.
  const database = await openDatabase({ databaseUrl: null, dataDir: null });
  const config = loadConfig({ SVC_MASTER_KEY: 'svc_sk_openapi_print_0123456789abcdefghij', SVC_ENCRYPTION_KEY: '0'.repeat(64), LOG_LEVEL: 'silent' });
  const deps = await createDeps(config, { database, log: pino({ level: 'silent' }) });
  const app = await buildApp(deps);
  await app.ready();
  try {
    return printOpenApi(app);
  } finally {
    await app.close();
    await closeDeps(deps);
  }
}

const printed = await generate();
if (process.argv.includes('--check')) {
  const committed = existsSync(target) ? readFileSync(target, 'utf8') : null;
  if (committed !== printed) {
    const why = committed === null ? 'openapi.json is missing' : 'openapi.json differs from the document the routes generate';
    const a = (committed ?? '').split('\n');
    const b = printed.split('\n');
    const line = a.findIndex((l, i) => l !== b[i]);
    console.error(`openapi:check failed: ${why}${committed !== null ? ` (first difference at line ${line + 1})` : ''}.`);
    if (committed !== null) console.error(`  committed: ${JSON.stringify(a[line] ?? '<end of file>')}\n  printed:   ${JSON.stringify(b[line] ?? '<end of file>')}`);
    console.error('Run `npm run openapi:print` and commit openapi.json.');
    process.exit(1);
  }
  console.log('openapi.json is up to date.');
} else {
  writeFileSync(target, printed);
  console.log(`wrote ${path.relative(process.cwd(), target) || target}`);
}
process.exit(0);
