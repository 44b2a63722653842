import type { FastifyInstance } from 'fastify';
import { newId } from '../../src/kernel/ids.ts';
import { assertWithinBudget, chargeSpend } from '../../src/domain/budgets/service.ts';
import { ticketOf } from '../../src/api/hooks/auth.ts';
import { estimateTokens } from '../../src/limits/index.ts';

export interface StandInBody {
  messages: { role: string; content: string }[];
  max_tokens?: number;
  /** The provider's real prompt + completion tokens; absent: the reservation is left as is. */
  usage_tokens?: number;
  cost_micros?: number;
}

/**
 * The inference path's calls into limits and budgets, in its order, behind POST /test/inference (inference:write):
 * budget check, token reservation, (provider call), settlement, spend (to the month counters, and with an outcome to
 * the outcome writer, whose batch writes budget_spend and fires the alerts). Lets these tests see what a user sees
 * before the real inference route exists.
 */
export function standInInference(app: FastifyInstance): void {
  app.post<{ Body: StandInBody }>('/test/inference', { config: { action: 'inference.create' } }, async (req) => {
    const ctx = req.ctx;
    await assertWithinBudget(app.ports.budgets, ctx);
    const estimate = estimateTokens(req.body.messages, req.body.max_tokens);
    const ticket = ticketOf(req);
    const reserved = await ticket.reserve(estimate);
    if (req.body.usage_tokens !== undefined) await ticket.settle(req.body.usage_tokens);
    if (req.body.cost_micros) {
      const projectId = ctx.caller.projectId ?? ctx.projectId!;
      const cost = BigInt(req.body.cost_micros);
      const project = await app.deps.projectCache.get(projectId);
      const { charge, added } = chargeSpend(app.ports.budgets, ctx, projectId, cost, project?.budgetMicros ?? null);
      const now = ctx.now();
      const recorded = app.deps.outcomes.record({
        requestId: ctx.requestId,
        projectId,
        keyId: ctx.caller.keyId,
        model: 'stand-in',
        route: null,
        region: null,
        cacheHit: false,
        status: 'succeeded',
        errorCode: null,
        promptTokens: 0,
        completionTokens: 0,
        costMicros: cost,
        latencyMs: 0,
        createdAt: now,
        eventId: newId('evt', now.getTime()),
        spend: charge,
      });
      await Promise.all([added, recorded]);
    }
    return { estimate, reserved };
  });
}
