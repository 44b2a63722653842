import { chmodSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { defineConfig } from 'prisma/config';

// The Prisma CLI insists on a native schema-engine binary that cannot be downloaded on machines that reach only the
// npm registry. generate/validate/format only check that one exists, so point them at a stub unless a real engine
// is configured. Migrations do not use the CLI's engine at all: see scripts/db-migrate.ts (WebAssembly engine).
if (!process.env.PRISMA_SCHEMA_ENGINE_BINARY) {
  const dir = path.join(tmpdir(), 'svc-prisma-stub');
  const stub = path.join(dir, 'schema-engine');
  if (!existsSync(stub)) {
    mkdirSync(dir, { recursive: true });
    writeFileSync(stub, '#!/bin/sh\necho "schema-engine-cli stub (use npm run db:migrate:*)"\n');
    chmodSync(stub, 0o755);
  }
  process.env.PRISMA_SCHEMA_ENGINE_BINARY = stub;
}

export default defineConfig({
  schema: 'prisma/schema.prisma',
  migrations: { path: 'prisma/migrations' },
  datasource: { url: process.env.DATABASE_URL ?? '' },
});
