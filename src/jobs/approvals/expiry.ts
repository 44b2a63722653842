import type { Deps } from '../../deps.ts';
import { expireOverdueApprovals } from '../../domain/governance/approvals.ts';

type ExpiryDeps = Pick<Deps, 'db' | 'clock' | 'log'>;

/**
 * The background worker's approval sweep (CONTRACT §15): every minute (wall time), pending approvals past their
 * 24 hours on the injected clock become `expired`, audited approval.expire. Callers see them expired from the moment
 * they are overdue anyway (the status is computed), and approving one is refused; the sweep writes the trail.
 */
export function startApprovalExpiry(deps: ExpiryDeps, everyMs = 60_000): { stop(): void } {
  let running = false;
  const tick = async () => {
    if (running) return;
    running = true;
    try {
      const n = await expireOverdueApprovals(deps.db, new Date(deps.clock.now()));
      if (n > 0) deps.log.info({ approvals: n }, 'approvals expired');
    } catch (err) {
      deps.log.error({ err }, 'approval expiry failed; retrying next minute');
    } finally {
      running = false;
    }
  };
  const timer = setInterval(() => void tick(), everyMs);
  timer.unref();
  void tick();
  return { stop: () => clearInterval(timer) };
}
