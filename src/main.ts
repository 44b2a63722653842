import { closeDeps, createDeps } from './app-deps.ts';
import { loadConfig, runsBackgroundWork } from './config/config.ts';
import { ConfigError } from './config/environment.ts';
import { buildApp, buildHealthApp } from './api/app.ts';
import { DRAIN_MARGIN_MS, drainOnClose } from './api/server-lifecycle.ts';
import { startDailyUsageSummaries } from './jobs/daily-summary/daily-summary.ts';
import { startApprovalExpiry } from './jobs/approvals/expiry.ts';
import { startRagIndexer } from './jobs/rag-indexing/worker.ts';
import { startEvalRunner, type EvalRunner } from './jobs/eval-runner/runner.ts';
import { startBatchRunner, type BatchRunner } from './jobs/batch-runner/runner.ts';
import { startRetentionPurge } from './jobs/retention-purge/purge.ts';
import { startPartitionUpkeep } from './jobs/partition-upkeep/upkeep.ts';
import { VerticalWorker } from './jobs/vertical-work/worker.ts';

async function main(): Promise<void> {
  // A signal that comes before the gateway is built (the first start's migrations, say) is held until startup has
  // finished: stopping in the middle of a migration would leave the database with a failed one (Prisma P3009).
  let shutdown: ((signal: string) => Promise<void>) | null = null;
  let pendingSignal: string | null = null;
  const onSignal = (signal: string) => {
    if (shutdown) void shutdown(signal);
    else if (!pendingSignal) {
      pendingSignal = signal;
      process.stderr.write(`${signal} during startup: stopping once startup has finished\n`);
    }
  };
  process.on('SIGTERM', () => onSignal('SIGTERM'));
  process.on('SIGINT', () => onSignal('SIGINT'));

  let config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`configuration error: ${err.message}\n`);
      process.exit(1);
    }
    throw err;
  }
  let deps;
  try {
    deps = await createDeps(config);
  } catch (err) {
    process.stderr.write(`startup failed: ${(err as Error).message}\n`);
    process.exit(1);
  }
  // SVC_ROLE (README "Running several replicas"): api serves HTTP only; worker does the background work only.
  const background = runsBackgroundWork(config);
  const app = config.role === 'worker' ? await buildHealthApp(deps) : await buildApp(deps);
  // README "Configuration" (the drain): answers in flight go out with Connection: close, idle connections are closed,
  // and whatever is still open after SVC_ROUTING_TIMEOUT_MS + 5 s is cut; on every role.
  const http = drainOnClose(app, { deadlineMs: config.routingTimeoutMs + DRAIN_MARGIN_MS, log: deps.log });
  let usageSummaries: { stop(): void } | null = null;
  let approvalExpiry: { stop(): void } | null = null;
  let ragIndexer: { stop(): Promise<void> } | null = null;
  let evalRunner: EvalRunner | null = null;
  let batchRunner: BatchRunner | null = null;
  let retentionPurge: { stop(): void } | null = null;
  let partitionUpkeep: { stop(): void } | null = null;
  let verticalWork: VerticalWorker | null = null;

  let closing = false;
  shutdown = async (signal: string) => {
    if (closing) return;
    closing = true;
    deps.log.info({ signal }, 'shutting down: finishing requests in flight');
    usageSummaries?.stop();
    approvalExpiry?.stop();
    retentionPurge?.stop();
    partitionUpkeep?.stop();
    try {
      // Webhook attempts in flight finish (each within its deadline) while HTTP requests drain.
      // An evaluation case in flight finishes (its result is written); the rest resume on the next start.
      await Promise.all([http.close(), deps.webhooks.worker.stop(), evalRunner?.stop(), batchRunner?.stop(), verticalWork?.stop(), ragIndexer?.stop()]);
      await closeDeps(deps);
      process.exit(0);
    } catch (err) {
      deps.log.error({ err }, 'unclean shutdown');
      process.exit(1);
    }
  };
  if (pendingSignal) return void shutdown(pendingSignal);

  try {
    await app.listen({ host: config.host, port: config.port });
  } catch (err) {
    process.stderr.write(`cannot listen on ${config.host}:${config.port}: ${(err as Error).message}\n`);
    process.exit(1);
  }
  deps.log.info({ role: config.role, port: config.port }, 'listening');
  if (!background || closing) return;
  await deps.webhooks.worker.start();
  usageSummaries = startDailyUsageSummaries(deps);
  approvalExpiry = startApprovalExpiry(deps);
  ragIndexer = startRagIndexer(deps);
  evalRunner = startEvalRunner(deps);
  batchRunner = startBatchRunner(deps);
  retentionPurge = startRetentionPurge(deps);
  partitionUpkeep = startPartitionUpkeep(deps);
  verticalWork = new VerticalWorker(deps);
  verticalWork.start();
}

void main();
