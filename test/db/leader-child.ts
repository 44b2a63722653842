/**
 * A replica for test/scale/leader.test.ts: leads the sweep `name` of `schema` on the PostgreSQL at `url` (its direct
 * session, as the gateway does) and prints `ran` each time its sweep runs, until killed.
 * Usage: node --import tsx test/db/leader-child.ts <url> <schema> <name> <everyMs>
 */
import { DirectSession } from '../../src/db/direct-session.ts';
import { AdvisoryLeadership } from '../../src/db/leadership.ts';
import { startSweep } from '../../src/jobs/sweep.ts';

const [url, schema, name, everyMs] = process.argv.slice(2) as [string, string, string, string];
const session = new DirectSession(url, { warn: () => {} });
const leadership = new AdvisoryLeadership(session, schema);
const quiet = { info: () => {}, error: () => {} };
startSweep(
  quiet,
  {
    run: async () => {
      process.stdout.write('ran\n');
      return 0;
    },
    done: () => [{}, ''],
    failed: '',
  },
  Number(everyMs),
  { leadership, name },
);
// The sweep's timer is unref'd (it never keeps a gateway alive): this one keeps the replica running until killed.
setInterval(() => {}, 60_000);
