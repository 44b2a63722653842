import { legalWork } from '../legal/work.ts';
import { devWork } from '../dev/work.ts';
import { opsWork } from '../ops/work.ts';
import { riskWork } from '../risk/work.ts';
import type { WorkKind } from './work.ts';

/** Every kind of vertical model work the runner knows (each vertical's work.ts lists its own). */
const KINDS = new Map<string, WorkKind>([...riskWork, ...opsWork, ...legalWork, ...devWork].map((k) => [k.kind, k]));

export const workKind = (kind: string): WorkKind | undefined => KINDS.get(kind);
export const workKinds = (): WorkKind[] => [...KINDS.values()];
