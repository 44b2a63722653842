import { spendReport, type SpendCell, type SpendFigures, type SpendReport } from '../domain/usage/spend.ts';
import { microsToUsd } from '../kernel/money.ts';
import { builder } from './builder.ts';
import { listFilters } from './inputs.ts';

const SpendTotalsRef = builder.objectRef<SpendFigures & { value?: string | null }>('SpendTotals').implement({
  fields: (t) => ({
    value: t.string({
      nullable: true,
      description: "The dimension's value (a key id, model, customer, route or status; '' for none); null on the overall totals and for the values past `top`.",
      resolve: (f) => f.value ?? null,
    }),
    requests: t.exposeInt('requests'),
    promptTokens: t.float({ description: 'A float: sums may pass 2^31.', resolve: (f) => f.promptTokens }),
    completionTokens: t.float({ description: 'A float: sums may pass 2^31.', resolve: (f) => f.completionTokens }),
    costUsd: t.float({ resolve: (f) => microsToUsd(f.costMicros) }),
  }),
});

const SpendCellRef = builder.objectRef<SpendCell>('SpendCell').implement({
  description: 'Spend of one UTC day and one value of the dimension.',
  fields: (t) => ({
    date: t.exposeString('date', { description: 'YYYY-MM-DD (UTC).' }),
    value: t.string({ nullable: true, description: "The dimension's value; null: the values past `top`, summed.", resolve: (c) => c.value }),
    requests: t.exposeInt('requests'),
    promptTokens: t.float({ resolve: (f) => f.promptTokens }),
    completionTokens: t.float({ resolve: (f) => f.completionTokens }),
    costUsd: t.float({ resolve: (f) => microsToUsd(f.costMicros) }),
  }),
});

const SpendReportRef = builder.objectRef<SpendReport>('SpendReport').implement({
  description: 'Spend per day and per key, model, customer, route or status, aggregated in the database.',
  fields: (t) => ({
    by: t.exposeString('by'),
    startDate: t.exposeString('startDate'),
    endDate: t.exposeString('endDate'),
    cells: t.field({ type: [SpendCellRef], description: 'One per day and value with usage, oldest day first.', resolve: (r) => r.cells }),
    values: t.field({ type: [SpendTotalsRef], description: 'One per value over the range, costliest first.', resolve: (r) => r.values }),
    otherValues: t.exposeInt('otherValues', { description: 'How many values are summed as the one with value null.' }),
    totals: t.field({ type: SpendTotalsRef, resolve: (r) => r.totals }),
  }),
});

builder.queryField('spend', (t) =>
  t.field({
    type: SpendReportRef,
    nullable: true,
    authScopes: { action: 'usage.read' },
    description: 'Spend per UTC day split by key, model, customer, route or status (the console\'s Spend screen); dates YYYY-MM-DD, inclusive, default the last 30 days.',
    args: { projectId: t.arg.id(), by: t.arg.string({ description: 'key (default), model, customer, route or status.' }), startDate: t.arg.string(), endDate: t.arg.string(),
      top: t.arg.int({ description: 'Keep the costliest 1 to 100 values; the others are summed as one with value null.' }) },
    resolve: (_root, args, { ctx, ports }) => spendReport(ports.usage, ctx, listFilters(args)),
  }),
);
