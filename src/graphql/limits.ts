import { costLimitRule } from '@escape.tech/graphql-armor-cost-limit';
import { maxAliasesPlugin } from '@escape.tech/graphql-armor-max-aliases';
import { maxDepthPlugin } from '@escape.tech/graphql-armor-max-depth';
import type { DocumentNode, OperationDefinitionNode, ValidationRule } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import { GraphQLError, Kind, validate, visit } from './graphql-js.ts';

/**
 * Depth counts nested selections: the deepest dashboard query (webhooks → edges → node → deliveries → edges → node →
 * attemptLog → field) is 8.
 */
export const MAX_DEPTH = 10;

/**
 * graphql-armor's estimate: 1 per scalar, 2 per object, x1.5 per level, and a list's cost multiplied by its
 * first/last. The dashboard query of 100 keys and 20 webhooks with their last 10 deliveries costs about 46,000;
 * 100 webhooks with 100 deliveries each would cost millions.
 */
export const MAX_COST = 100_000;

/**
 * Aliases per operation (graphql-armor's default): a request counts once in the rate limits, so without this one
 * request could repeat a field thousands of times under different names (3,000 `keys` lists, or as many mutations).
 */
export const MAX_ALIASES = 15;

/** Whether a page size comes from a variable: then the cost depends on the request, not on the document alone. */
function hasVariablePageSize(document: DocumentNode): boolean {
  let found = false;
  visit(document, {
    Argument(node) {
      if ((node.name.value === 'first' || node.name.value === 'last') && node.value.kind === Kind.VARIABLE) found = true;
    },
  });
  return found;
}

/**
 * first/last passed as variables become literals, so the estimate multiplies by the page size actually asked: the
 * value sent, else the default of the operation's own variable (`query($n: Int = 100)`). A fragment can be spread into
 * any operation, so in fragments the largest default of that name counts.
 */
function inlinePageSizes(document: DocumentNode, variables: Record<string, unknown> | undefined): DocumentNode {
  const defaultsOf = (definition: OperationDefinitionNode) =>
    new Map(
      (definition.variableDefinitions ?? [])
        .filter((v) => v.defaultValue?.kind === Kind.INT)
        .map((v) => [v.variable.name.value, Number((v.defaultValue as { value: string }).value)] as const),
    );
  const largest = new Map<string, number>();
  for (const definition of document.definitions) {
    if (definition.kind !== Kind.OPERATION_DEFINITION) continue;
    for (const [name, value] of defaultsOf(definition)) largest.set(name, Math.max(value, largest.get(name) ?? value));
  }
  let defaults = largest;
  return visit(document, {
    OperationDefinition: {
      enter(node) {
        defaults = defaultsOf(node);
      },
      leave() {
        defaults = largest;
      },
    },
    Argument(node) {
      if ((node.name.value !== 'first' && node.name.value !== 'last') || node.value.kind !== Kind.VARIABLE) return undefined;
      const name = node.value.name.value;
      const value = variables && name in variables ? variables[name] : defaults.get(name);
      if (typeof value !== 'number' || !Number.isInteger(value)) return undefined;
      return { ...node, value: { kind: Kind.INT, value: String(value) } };
    },
  });
}

/**
 * Refuses a query whose estimated cost is over maxCost, at validation: before any resolver or SQL runs. armor's own
 * plugin only multiplies by literal page sizes (validation never sees variables); this one also reads the variables.
 */
function costLimit(maxCost: number): Plugin {
  // Yoga caches parsed documents, so a repeated query is the same object: its verdict is kept unless variables count.
  const verdicts = new WeakMap<DocumentNode, { variable: boolean; refused: GraphQLError[] }>();
  const check = (schema: Parameters<typeof validate>[0], document: DocumentNode) => {
    const refused: GraphQLError[] = [];
    const rule = costLimitRule({ maxCost, propagateOnRejection: false, onReject: [(_ctx, err) => refused.push(err)] });
    validate(schema, document, [rule as unknown as ValidationRule]);
    return refused;
  };
  return {
    onValidate({ params, context, setResult }) {
      const document = params.documentAST;
      let verdict = verdicts.get(document);
      if (!verdict) {
        const variable = hasVariablePageSize(document);
        verdict = { variable, refused: variable ? [] : check(params.schema, document) };
        verdicts.set(document, verdict);
      }
      const variables = (context as { params?: { variables?: Record<string, unknown> } }).params?.variables;
      const refused = verdict.variable ? check(params.schema, inlinePageSizes(document, variables ?? undefined)) : verdict.refused;
      if (refused.length > 0) setResult(refused);
    },
  };
}

/** The query protections of /graphql: depth and cost, both checked before execution. */
export function queryLimits(opts: { maxDepth?: number; maxCost?: number; maxAliases?: number } = {}): Plugin[] {
  return [
    maxAliasesPlugin({
      n: opts.maxAliases ?? MAX_ALIASES,
      propagateOnRejection: false,
      onReject: [(context, error) => context?.reportError(error)],
    }) as Plugin,
    // Reported as a validation error (HTTP 400 like any invalid query), not thrown.
    maxDepthPlugin({
      n: opts.maxDepth ?? MAX_DEPTH,
      flattenFragments: true,
      propagateOnRejection: false,
      onReject: [(context, error) => context?.reportError(error)],
    }) as Plugin,
    costLimit(opts.maxCost ?? MAX_COST),
  ];
}
