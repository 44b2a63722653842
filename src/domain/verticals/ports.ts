import type { Db } from '../../db/client.ts';
import type { OncePorts } from '../inference/once.ts';

/** A project's own prompt template that replaces a built-in one of the same name (CONTRACT §10). */
export interface ProjectPrompt {
  templateId: string;
  version: number;
  /** The version's model; null: the built-in's (else `auto`). */
  model: string | null;
  /** The variables the version declares: only those are passed (the template stage refuses others). */
  variables: string[];
}

/**
 * Where a vertical's prompt comes from before its built-in default: the project's own template named as the built-in
 * one (`risk.assessment`, `ops.postmortem`, …), its latest version. The work then sends `template: {id, version,
 * variables}` through the inference pipeline, which renders it as for any templated inference (and the usage record
 * names it); the result's schema stays the built-in's, as the vertical reads its fields.
 */
export interface PromptSource {
  find(db: Db, projectId: string, name: string): Promise<ProjectPrompt | null>;
}

export const builtinPromptsOnly: PromptSource = { find: async () => null };

/** The project's template of that name (templates are unique by name in a project). */
export const projectTemplates: PromptSource = {
  async find(db, projectId, name) {
    const t = await db.template.findUnique({ where: { projectId_name: { projectId, name } }, select: { id: true, latestVersion: true } });
    if (!t) return null;
    const v = await db.templateVersion.findUnique({ where: { templateId_version: { templateId: t.id, version: t.latestVersion } }, select: { model: true, variables: true } });
    const declared = ((v?.variables ?? []) as { name?: unknown }[]).map((x) => x.name).filter((n): n is string => typeof n === 'string');
    return { templateId: t.id, version: t.latestVersion, model: v?.model ?? null, variables: declared };
  },
};

/**
 * What the model-work runner needs: what a call made at most once needs (the inference pipeline's own ports, the
 * limiter for the job's ticket, the idempotency store the call is begun in), and the prompts.
 */
export interface VerticalPorts extends OncePorts {
  prompts: PromptSource;
}
