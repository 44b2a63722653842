import type { FastifyInstance } from 'fastify';
import { assertWithinBudget, estimateTokens, recordSpend, reserveTokens, settleTokens } from '../../src/limits/index.ts';
import { ROUTE_ACCESS } from '../../src/rest/scopes.ts';

export interface StandInBody {
  messages: { role: string; content: string }[];
  max_tokens?: number;
  /** The provider's real prompt + completion tokens; absent: the reservation is left as is. */
  usage_tokens?: number;
  cost_micros?: number;
}

/**
 * The inference path's calls into limits and budgets, in its order, behind POST /test/inference (inference:write):
 * budget check, token reservation, (provider call), settlement, spend. Lets these tests see what a user sees before
 * the real inference route exists.
 */
export function standInInference(app: FastifyInstance): void {
  ROUTE_ACCESS['POST /test/inference'] = 'inference:write';
  app.post<{ Body: StandInBody }>('/test/inference', async (req) => {
    const ctx = req.ctx;
    await assertWithinBudget(ctx);
    const estimate = estimateTokens(req.body.messages, req.body.max_tokens);
    const reservation = await reserveTokens(ctx, estimate);
    if (req.body.usage_tokens !== undefined) await settleTokens(ctx, reservation, req.body.usage_tokens);
    if (req.body.cost_micros) await recordSpend(ctx, BigInt(req.body.cost_micros));
    return { estimate, reserved: reservation.tokens };
  });
}
