import { listProviders, type ConfiguredModel, type ProviderStatus, type RecentTraffic } from '../domain/providers/service.ts';
import { builder } from './builder.ts';

const ConfiguredModelRef = builder.objectRef<ConfiguredModel>('ConfiguredModel').implement({
  description: 'A model of the providers file, with its prices in USD per million tokens.',
  fields: (t) => ({
    id: t.exposeString('id'),
    type: t.exposeString('type', { description: 'chat or embedding.' }),
    inputPerMtok: t.exposeFloat('inputPerMtok'),
    outputPerMtok: t.exposeFloat('outputPerMtok'),
    cacheReadPerMtok: t.exposeFloat('cacheReadPerMtok', { nullable: true, description: 'Prompt-cache reads; null: the input price.' }),
    cacheWritePerMtok: t.exposeFloat('cacheWritePerMtok', { nullable: true, description: 'Prompt-cache writes; null: the input price.' }),
    batchDiscount: t.exposeFloat('batchDiscount', { nullable: true, description: 'The share taken off batch requests (0.5: half price); null: none set.' }),
  }),
});

const RecentTrafficRef = builder.objectRef<RecentTraffic>('ProviderRecentTraffic').implement({
  description: "The addressed project's own requests through the provider over the last hour (its usage records).",
  fields: (t) => ({
    requests: t.exposeInt('requests'),
    failed: t.exposeInt('failed'),
    errorRate: t.exposeFloat('errorRate', { description: 'failed / requests; 0 when there were none.' }),
    latencyP50Ms: t.exposeInt('latencyP50Ms', { nullable: true }),
    latencyP95Ms: t.exposeInt('latencyP95Ms', { nullable: true }),
    lastAt: t.expose('lastAt', { type: 'UnixSeconds', nullable: true }),
  }),
});

const ProviderStatusRef = builder.objectRef<ProviderStatus>('ProviderStatus').implement({
  description: 'A provider of the providers file (its base url and key stay the operator\'s), with its live health.',
  fields: (t) => ({
    name: t.exposeString('name'),
    kind: t.exposeString('kind', { description: 'openai, azure_openai, anthropic, gemini, bedrock or mock.' }),
    region: t.exposeString('region'),
    timeoutMs: t.exposeInt('timeoutMs'),
    circuit: t.exposeString('circuit', { description: "closed, open or half_open: the answering replica's circuit breaker." }),
    models: t.field({ type: [ConfiguredModelRef], resolve: (p) => p.models }),
    recent: t.field({ type: RecentTrafficRef, resolve: (p) => p.recent }),
  }),
});

builder.queryFields((t) => ({
  providers: t.field({
    type: [ProviderStatusRef],
    nullable: true,
    authScopes: { action: 'provider.list' },
    description: 'The configured providers and models with prices, circuit state and the project\'s last hour of traffic through each.',
    args: { projectId: t.arg.id() },
    resolve: (_root, args, { ctx, ports }) => listProviders(ports.inference.providers, ctx, args.projectId === null || args.projectId === undefined ? null : String(args.projectId)),
  }),
}));
