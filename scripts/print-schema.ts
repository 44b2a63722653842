// Prints the GraphQL schema built by src/graphql (the Pothos builder) to schema.graphql at the repository root.
//   npm run schema:print   rewrite schema.graphql
//   npm run schema:check   exit 1 when the committed schema.graphql differs from what the builder prints (CI)
//   --file <path>          another file than schema.graphql (tests)
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { lexicographicSortSchema, printSchema } from '../src/graphql/graphql-js.ts';
import { schema } from '../src/graphql/schema.ts';

const fileArg = process.argv.indexOf('--file');
const target =
  fileArg > 0 && process.argv[fileArg + 1]
    ? path.resolve(process.argv[fileArg + 1]!)
    : path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'schema.graphql');
const printed = `${printSchema(lexicographicSortSchema(schema))}\n`;

if (process.argv.includes('--check')) {
  const committed = existsSync(target) ? readFileSync(target, 'utf8') : null;
  if (committed !== printed) {
    const why = committed === null ? 'schema.graphql is missing' : 'schema.graphql differs from the schema the builder prints';
    const a = (committed ?? '').split('\n');
    const b = printed.split('\n');
    const line = a.findIndex((l, i) => l !== b[i]);
    console.error(`schema:check failed: ${why}${committed !== null ? ` (first difference at line ${line + 1})` : ''}.`);
    if (committed !== null) console.error(`  committed: ${JSON.stringify(a[line] ?? '<end of file>')}\n  printed:   ${JSON.stringify(b[line] ?? '<end of file>')}`);
    console.error('Run `npm run schema:print` and commit schema.graphql.');
    process.exit(1);
  }
  console.log('schema.graphql is up to date.');
} else {
  writeFileSync(target, printed);
  console.log(`wrote ${path.relative(process.cwd(), target) || target}`);
}
