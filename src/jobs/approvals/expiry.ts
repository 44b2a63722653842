import type { Deps } from '../../deps.ts';
import { expireOverdueApprovals } from '../../domain/governance/approvals.ts';
import { startSweep } from '../sweep.ts';

type ExpiryDeps = Pick<Deps, 'db' | 'database' | 'clock' | 'log'>;

/**
 * The background worker's approval sweep (CONTRACT §15): every minute (wall time), pending approvals past their
 * 24 hours on the injected clock become `expired` (on the replica that leads the sweep), audited approval.expire. Callers see them expired from the moment
 * they are overdue anyway (the status is computed), and approving one is refused; the sweep writes the trail.
 */
export function startApprovalExpiry(deps: ExpiryDeps, everyMs = 60_000): { stop(): void } {
  return startSweep(
    deps.log,
    { run: () => expireOverdueApprovals(deps.db, new Date(deps.clock.now())), done: (n) => [{ approvals: n }, 'approvals expired'], failed: 'approval expiry failed; retrying next minute' },
    everyMs,
    { leadership: deps.database.leadership, name: 'approval-expiry' },
  );
}
