import type { Logger } from 'pino';
import type { Config } from '../../config/config.ts';
import type { Database, Db } from '../../db/client.ts';
import type { Clock } from '../../domain/context.ts';
import type { WebhookRuntime } from '../../domain/events/ports.ts';
import { EgressPolicy } from '../../kernel/egress.ts';
import { createSecretBox } from '../../kernel/secret-box.ts';
import { DeliveryWorker, type DeliveryWorkerOptions } from './worker.ts';

/** What webhooks need process-wide: the secret encryption, the egress guard and the delivery worker (not started). */
export function createWebhookRuntime(
  base: { config: Readonly<Config>; db: Db; database: Database; clock: Clock; log: Logger },
  workerOptions: DeliveryWorkerOptions = {},
): WebhookRuntime & { worker: DeliveryWorker } {
  const { config, log } = base;
  const secretBox = createSecretBox({
    encryptionKey: config.encryptionKey,
    dataDir: config.dataDir,
    onGenerated: (file) => {
      log.warn(
        { file },
        config.databaseUrl
          ? 'generated a webhook secret key in the data directory: set SVC_ENCRYPTION_KEY (the same on every replica)'
          : 'generated a webhook secret key in the data directory (set SVC_ENCRYPTION_KEY to choose your own)',
      );
    },
  });
  const egress = new EgressPolicy(config.egressAllowlist);
  const worker = new DeliveryWorker({ ...base, secretBox, egress }, workerOptions);
  return { secretBox, egress, worker };
}
