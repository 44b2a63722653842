import { Session } from 'node:inspector/promises';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import { buildTestApp, client, seedProject } from '../test/helpers/app.ts';

/**
 * The walk of one request: which of this repository's src/ files run a function while it is answered (any function:
 * hooks are often anonymous callbacks), in the order V8 reports them. Precise coverage counts calls; the counters are
 * reset after a warm-up of the same request, so one request's files are what is left (ARCHITECTURE.md's walks). The
 * app runs as deployed in its embedded mode with the mock provider, without the test suite's response check. Background work triggered by the request (the usage writer, the
 * webhook delivery) runs after the answer and is counted apart, once the request's own files are taken.
 * Usage: node --import tsx bench/walk.ts
 */
const ROOT = path.resolve(fileURLToPath(import.meta.url), '../../src') + path.sep;

type Coverage = Awaited<ReturnType<typeof takeCoverage>>;
async function takeCoverage(session: Session) {
  const { result } = await session.post('Profiler.takePreciseCoverage');
  return result;
}

function filesRun(coverage: Coverage): string[] {
  const files: string[] = [];
  for (const script of coverage) {
    if (!script.url.startsWith('file://')) continue;
    const file = fileURLToPath(script.url);
    if (!file.startsWith(ROOT) || file.includes(`${path.sep}generated${path.sep}`)) continue;
    // Every function that ran counts, anonymous ones included (a hook is often an arrow function); only the module's
    // own top level (the unnamed function at offset 0, run when the file was loaded) does not.
    const ran = script.functions.some((f) => f.ranges[0]!.count > 0 && (f.functionName !== '' || f.ranges[0]!.startOffset !== 0));
    if (ran) files.push(path.relative(ROOT, file));
  }
  return files;
}

async function walk(session: Session, name: string, request: () => Promise<unknown>, settle: () => Promise<void>) {
  for (let i = 0; i < 5; i++) await request();
  await settle();
  await takeCoverage(session); // reset
  await request();
  const own = filesRun(await takeCoverage(session));
  await settle();
  const background = filesRun(await takeCoverage(session)).filter((f) => !own.includes(f));
  console.log(`\n${name}: ${own.length} files on the request path, ${background.length} more in the background`);
  for (const f of own) console.log(`  ${f}`);
  if (background.length) console.log(`  background: ${background.join(', ')}`);
}

// As deployed: without the test suite's response check (SVC_CHECK_RESPONSES), which serializes every answer twice.
const t = await buildTestApp({ env: { SVC_CHECK_RESPONSES: 'false' } });
const api = client(t.app);
const seeded = await seedProject(api, { scopes: ['keys:manage', 'inference:write'] });
const session = new Session();
session.connect();
await session.post('Profiler.enable');
await session.post('Profiler.startPreciseCoverage', { callCount: true, detailed: false });
const settle = async () => {
  await t.deps.outcomes.flush({ timeoutMs: 5_000 });
  await new Promise((r) => setTimeout(r, 300));
};
let n = 0;
await walk(session, 'POST /v1/keys', async () => {
  const res = await api.post('/v1/keys', { project_id: seeded.projectId, name: `walk-${n++}`, scopes: ['inference:write'] });
  if (res.status !== 200) throw new Error(`key creation answered ${res.status}: ${JSON.stringify(res.body)}`);
}, settle);
const asKey = client(t.app, seeded.secret);
await walk(
  session,
  'POST /v1/inference (uncached)',
  async () => {
    const res = await asKey.post('/v1/inference', { project_id: seeded.projectId, model: 'mock-1', messages: [{ role: 'user', content: `walk ${n++}` }] });
    if (res.status !== 200) throw new Error(`inference answered ${res.status}: ${JSON.stringify(res.body)}`);
  },
  settle,
);
await session.post('Profiler.stopPreciseCoverage');
await t.close();
