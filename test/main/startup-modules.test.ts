import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { outputToEnd } from '../helpers/gateway-process.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/**
 * What `npm start`'s entry point loads before it does anything: the static import graph of src/main.ts. The packages
 * below are loaded where they are first needed (README "Memory": the first nine, about 11 MB of heap that a PostgreSQL
 * deployment with no Bedrock provider, no SMTP, no PII redaction and no RAG upload never uses; the rest were already). A static import of one
 * of them anywhere under main.ts puts it back in every process; this test names it.
 */
const LOADED_ON_FIRST_USE = [
  '@electric-sql/pglite', // the embedded database (db/client.ts, db/migrations.ts)
  'pglite-prisma-adapter',
  'nodemailer', // budget alert e-mails (jobs/budget-alerts/mailer.ts)
  'libphonenumber-js', // PII redaction (domain/privacy/pii.ts)
  'ibantools',
  '@smithy/core', // Bedrock's event streams and signing (providers/bedrock.ts)
  'aws4',
  'html-to-text', // RAG uploads (domain/rag/extract.ts)
  'unpdf',
  'gpt-tokenizer', // a provider that reports no usage (limits/tokens.ts)
  '@opentelemetry/sdk-trace', // OTEL_EXPORTER_OTLP_ENDPOINT set (observability/tracing.ts)
  'scimmy', // SCIM, SSO: only when configured (api/routes/scim.ts, api/routes/sso.ts)
  'openid-client',
  '@node-saml/node-saml',
  '@modelcontextprotocol/sdk', // the MCP gateway's first request (domain/mcp/proxy.ts)
];

// A resolve hook that prints every package a module of the graph resolves. Where Node has synchronous in-thread hooks
// (module.registerHooks: Node 22.15+, 24) tsx registers its own there, and a module.register() hook on the hooks thread
// is then never asked (on Node 24 this test saw no package at all): the hook goes where tsx's went.
const PRINT = `const m = /\\/node_modules\\/((?:@[^/]+\\/)?[^/]+)\\//.exec(r.url);
  if (m) process.stderr.write('RESOLVED ' + m[1] + '\\n');
  return r;`;
const HOOK = `data:text/javascript,${encodeURIComponent(`
import module from 'node:module';
if (typeof module.registerHooks === 'function') {
  module.registerHooks({ resolve(specifier, context, next) {
    const r = next(specifier, context);
    ${PRINT}
  } });
} else {
  module.register('data:text/javascript,' + encodeURIComponent(\`
export async function resolve(specifier, context, next) {
  const r = await next(specifier, context);
  ${PRINT.replaceAll('\\', '\\\\')}
}\`));
}
`)}`;

async function packagesLoadedAtStart(): Promise<{ code: number | null; packages: Set<string>; stderr: string }> {
  // PORT is refused by the configuration, so main.ts exits right after its imports, before opening anything.
  const child = spawn(process.execPath, ['--import', 'tsx', '--import', HOOK, 'src/main.ts'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH!, HOME: process.env.HOME ?? '/tmp', PORT: 'eighty', DATABASE_URL: 'postgresql://127.0.0.1:1/none' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const { code, stderr } = await outputToEnd(child);
  const packages = new Set([...stderr.matchAll(/^RESOLVED (\S+)$/gm)].map((m) => m[1]!));
  return { code, packages, stderr: stderr.replace(/^RESOLVED .*\n/gm, '') };
}

describe('start-up', () => {
  it('loads the optional packages only where they are first used', async () => {
    const run = await packagesLoadedAtStart();
    expect(run.stderr.trim()).toBe('configuration error: PORT: must be a whole number, got "eighty"');
    expect(run.code).toBe(1);
    // The hook sees the graph: the packages every request needs are in it.
    for (const pkg of ['fastify', 'ioredis', 'undici', '@prisma/client', 'graphql']) expect(run.packages).toContain(pkg);
    expect(LOADED_ON_FIRST_USE.filter((pkg) => run.packages.has(pkg))).toEqual([]);
  }, 60_000);
});
