import { Kind, parse, type DocumentNode, type SelectionSetNode, type ValueNode } from 'graphql';

const PROJECT_ARGS = new Set(['projectId', 'project_id']);
/** Bounds for a document parsed before yoga's own limits run: anything larger names no project here. */
const MAX_TOKENS = 20_000;
const MAX_DEPTH = 16;

/**
 * The project a GraphQL request's operation names (the tenancy resolver's "call's own argument", domain/context.ts (tenancy)):
 * the values of its arguments named projectId/project_id, given as literals, through variables, or inside input
 * objects, in the operation yoga will execute (operationName, or the only one). One project named: that project;
 * none, several, or a document that does not parse: null (yoga answers the bad document itself).
 */
export function graphqlProjectId(body: unknown): string | null {
  if (body === null || typeof body !== 'object') return null;
  const { query, variables, operationName } = body as { query?: unknown; variables?: unknown; operationName?: unknown };
  if (typeof query !== 'string') return null;
  let doc: DocumentNode;
  try {
    doc = parse(query, { noLocation: true, maxTokens: MAX_TOKENS });
  } catch {
    return null;
  }
  const vars = variables !== null && typeof variables === 'object' ? (variables as Record<string, unknown>) : {};
  const operations = doc.definitions.filter((d) => d.kind === Kind.OPERATION_DEFINITION);
  const operation =
    typeof operationName === 'string' ? operations.find((o) => o.name?.value === operationName) : operations.length === 1 ? operations[0] : undefined;
  if (!operation) return null;
  const fragments = new Map(doc.definitions.flatMap((d) => (d.kind === Kind.FRAGMENT_DEFINITION ? [[d.name.value, d.selectionSet] as const] : [])));

  const found = new Set<string>();
  // A JS value (a variable's): its projectId/project_id strings, at any depth up to MAX_DEPTH.
  const fromJs = (value: unknown, named: boolean, depth: number): void => {
    if (named && typeof value === 'string') found.add(value);
    if (depth > MAX_DEPTH || value === null || typeof value !== 'object') return;
    for (const [k, v] of Object.entries(value as Record<string, unknown>)) fromJs(v, PROJECT_ARGS.has(k), depth + 1);
  };
  const fromAst = (value: ValueNode, named: boolean, depth: number): void => {
    if (depth > MAX_DEPTH) return;
    switch (value.kind) {
      case Kind.STRING:
        if (named) found.add(value.value);
        return;
      case Kind.VARIABLE:
        return fromJs(vars[value.name.value], named, depth);
      case Kind.OBJECT:
        for (const f of value.fields) fromAst(f.value, PROJECT_ARGS.has(f.name.value), depth + 1);
        return;
      case Kind.LIST:
        for (const v of value.values) fromAst(v, named, depth + 1);
        return;
      default:
        return;
    }
  };

  // Selections walked with an explicit stack: a deeply nested document costs no call stack here.
  const stack: { set: SelectionSetNode; depth: number }[] = [{ set: operation.selectionSet, depth: 0 }];
  const seenFragments = new Set<string>();
  while (stack.length > 0) {
    const { set, depth } = stack.pop()!;
    if (depth > MAX_DEPTH) continue;
    for (const sel of set.selections) {
      if (sel.kind === Kind.FIELD) {
        for (const arg of sel.arguments ?? []) fromAst(arg.value, PROJECT_ARGS.has(arg.name.value), 0);
        if (sel.selectionSet) stack.push({ set: sel.selectionSet, depth: depth + 1 });
      } else if (sel.kind === Kind.INLINE_FRAGMENT) {
        stack.push({ set: sel.selectionSet, depth: depth + 1 });
      } else if (!seenFragments.has(sel.name.value)) {
        seenFragments.add(sel.name.value);
        const fragment = fragments.get(sel.name.value);
        if (fragment) stack.push({ set: fragment, depth: depth + 1 });
      }
    }
  }
  return found.size === 1 ? [...found][0]! : null;
}
