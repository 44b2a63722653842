import type { Tx } from '../../db/client.ts';
import type { LaggingReads } from '../../db/read-replica.ts';

/** What the audit list needs from outside the domain: where a read that may lag goes (DATABASE_READ_URL). */
export interface AuditPorts {
  reads: LaggingReads<Tx>;
}
