import type { Logger } from 'pino';
import type { Database } from '../../db/client.ts';
import type { DirectSession } from '../../db/direct-session.ts';
import { WAKE_CHANNEL, workerChannel, workerTag } from '../../domain/webhooks/wakeups.ts';

/** Workers listening on each direct session (apps sharing one Database in tests): the last one out stops listening. */
const listeners = new WeakMap<DirectSession, number>();

/**
 * Subscribes `onWake` to the delivery wake-ups (domain/webhooks/wakeups.ts). PostgreSQL: on the process's direct
 * session (db/direct-session.ts; never through PgBouncer, which cannot carry LISTEN), which listens on the schema's
 * common channel and on its own, and advertises itself by application_name so that a notifier can pick it. After a
 * lost connection is opened again the worker is woken, as notifications may have been missed. PGlite: the common
 * channel (one process, one worker).
 */
export async function listenForWakeups(database: Database, onWake: () => void, _log: Logger): Promise<() => Promise<void>> {
  if (database.kind === 'pglite') {
    const unlisten = await database.pglite!.listen(WAKE_CHANNEL, (payload) => {
      if (payload === database.schema) onWake();
    });
    return unlisten;
  }
  const session = database.direct!;
  const schema = database.schema;
  const offNotification = session.onNotification((channel, payload) => {
    if (channel === WAKE_CHANNEL ? payload === schema : session.pid !== null && channel === workerChannel(session.pid)) onWake();
  });
  const offReconnect = session.onReconnect(onWake);
  let removeStep: () => Promise<void>;
  try {
    removeStep = await session.addStep(
      (client, pid) => client.query(`LISTEN ${WAKE_CHANNEL}; LISTEN ${workerChannel(pid)}; SET application_name = '${workerTag(schema)}'`),
      (client) => (listeners.get(session) ? Promise.resolve() : client.query(`UNLISTEN *; RESET application_name`)),
    );
  } catch (err) {
    offNotification();
    offReconnect();
    throw err;
  }
  listeners.set(session, (listeners.get(session) ?? 0) + 1);
  return async () => {
    offNotification();
    offReconnect();
    listeners.set(session, listeners.get(session)! - 1);
    await removeStep();
  };
}
