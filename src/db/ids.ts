// Moved to src/kernel/ids.ts (issue 15: ids live in the kernel every layer may import). Kept for existing importers.
export { isId, newId, type IdPrefix } from '../kernel/ids.ts';
