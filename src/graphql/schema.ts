import { builder } from './builder.ts';
import './viewer.ts';
import './catalog.ts';
import './projects.ts';
import './keys.ts';
import './audit.ts';
import './webhooks.ts';
import './mcp.ts';
import './rate-limits.ts';
import './budgets.ts';
import './usage.ts';
import './routing.ts';
import './governance.ts';
import './privacy.ts';
import './operators.ts';
import './rag.ts';
import './evals.ts';
import './batches.ts';
import './templates.ts';
import './risk.ts';
import './ops.ts';
import './legal.ts';
import './dev.ts';

/** The whole control plane; scripts/print-schema.ts prints it to schema.graphql. */
export const schema = builder.toSchema();
