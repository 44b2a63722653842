import { Prisma, type Template, type TemplateVersion } from '../../generated/prisma/client.ts';
import type { Tx } from '../../db/client.ts';
import { newId } from '../../db/ids.ts';
import { SvcError, invalid } from '../../errors/svc-error.ts';
import { recordAudit } from '../audit/service.ts';
import { addressed, requireProjectId, visibleProjectId, type Ctx } from '../context.ts';
import { DEFAULT_PAGE_SIZE, paginate, type Page } from '../pagination.ts';
import { parseInput } from '../validation.ts';
import type { TemplatePorts } from './ports.ts';
import { checkVersion, normalizeVariables, renderMessages, type Variable } from './render.ts';
import {
  CreateTemplate,
  ListTemplatesQuery,
  ListVersionsQuery,
  PublishTemplateVersion,
  RenderTemplate,
  type TemplateMessage,
  type TemplateParams,
} from './schema.ts';
import * as store from './store.ts';

const notFound = () => new SvcError('not_found', { param: 'template_id', message: 'No such template.' });
const versionNotFound = () => new SvcError('not_found', { param: 'version', message: 'No such template version.' });

export const versionMessages = (v: TemplateVersion): TemplateMessage[] => v.messages as unknown as TemplateMessage[];
export const versionVariables = (v: TemplateVersion): Variable[] => v.variables as unknown as Variable[];
export const versionParams = (v: TemplateVersion): TemplateParams | null => (v.params as TemplateParams | null) ?? null;

interface VersionFields {
  messages: TemplateMessage[];
  variables?: Parameters<typeof normalizeVariables>[0];
  model?: string | null;
  params?: TemplateParams | null;
}

/** What the schema cannot say about a version's fields; returns them as stored. */
function versionData(ports: TemplatePorts, input: VersionFields) {
  const variables = normalizeVariables(input.variables);
  checkVersion(input.messages, variables);
  const model = input.model ?? null;
  if (model !== null && model !== 'auto' && !ports.providers.isKnownModel(model)) {
    throw invalid('model', `Unknown model "${model.slice(0, 200)}". GET /v1/models lists the models; "auto" routes by policy.`);
  }
  const params = input.params && Object.keys(input.params).length > 0 ? input.params : null;
  return {
    messages: input.messages.map((m) => ({ role: m.role, content: m.content })) as unknown as Prisma.InputJsonArray,
    variables: variables as unknown as Prisma.InputJsonArray,
    model,
    params: params === null ? Prisma.DbNull : (params as Prisma.InputJsonObject),
  };
}

const isUniqueViolation = (err: unknown) => err instanceof Prisma.PrismaClientKnownRequestError && err.code === 'P2002';

/** CONTRACT §10: creates the template and publishes version 1. Audits template.create. Name unique in the project. */
export async function createTemplate(ports: TemplatePorts, ctx: Ctx, raw: unknown): Promise<Template> {
  const input = parseInput(CreateTemplate, raw);
  const data = versionData(ports, input);
  const projectId = await requireProjectId(ctx, input.project_id ?? ctx.caller.projectId);
  const now = ctx.now();
  const nameTaken = () => invalid('name', `A template named "${input.name}" already exists in the project.`);
  try {
    return await ctx.db.$transaction(async (tx) => {
      if (await store.nameTaken(tx, projectId, input.name)) throw nameTaken();
      const template = await store.insertTemplate(tx, {
        id: newId('tpl', now.getTime()),
        projectId,
        name: input.name,
        description: input.description ?? null,
        latestVersion: 1,
        createdAt: now,
        updatedAt: now,
      });
      await store.insertVersion(tx, { templateId: template.id, version: 1, ...data, createdAt: now });
      await recordAudit(tx, ctx, 'template.create', { projectId, targetId: template.id, data: { name: template.name, version: 1 } });
      return template;
    });
  } catch (err) {
    // Two creates of one name at once: the unique index answers for the one that lost.
    if (isUniqueViolation(err)) throw nameTaken();
    throw err;
  }
}

/** The template, if the caller may see it (another project's looks absent). */
async function findVisible(ctx: Ctx, db: Tx, templateId: string, projectId: string | undefined): Promise<Template> {
  const template = await store.findTemplate(db, projectId, templateId);
  if (!template) throw notFound();
  addressed(ctx, template.projectId);
  return template;
}

/**
 * CONTRACT §10: publishes an immutable version, by default latest + 1; a number already published is 409
 * template_version_conflict. Audits template.publish. The template's cached head is evicted on every replica before
 * this answers, so the next inference without a version uses the new one.
 */
export async function publishTemplateVersion(ports: TemplatePorts, ctx: Ctx, templateId: string, raw: unknown): Promise<TemplateVersion> {
  const input = parseInput(PublishTemplateVersion, raw);
  const data = versionData(ports, input);
  const projectId = await visibleProjectId(ctx, input.project_id);
  const now = ctx.now();
  const conflict = (version: number) =>
    new SvcError('template_version_conflict', { param: 'version', message: `Version ${version} of this template is already published.` });
  let asked = input.version;
  try {
    const created = await ctx.db.$transaction(async (tx) => {
      const template = await findVisible(ctx, tx, templateId, projectId);
      const version = input.version ?? template.latestVersion + 1;
      asked = version;
      if (await store.findVersion(tx, template.id, version)) throw conflict(version);
      const row = await store.insertVersion(tx, { templateId: template.id, version, ...data, createdAt: now });
      await store.raiseLatest(tx, template.id, Math.max(version, template.latestVersion), now);
      await recordAudit(tx, ctx, 'template.publish', { projectId: template.projectId, targetId: template.id, data: { version } });
      return row;
    });
    await ports.cache.invalidate(created.templateId);
    return created;
  } catch (err) {
    if (isUniqueViolation(err)) throw conflict(asked ?? 0);
    throw err;
  }
}

export async function listTemplates(ctx: Ctx, raw: unknown): Promise<Page<Template>> {
  const query = parseInput(ListTemplatesQuery, raw);
  const projectId = await visibleProjectId(ctx, query.project_id);
  const where: Prisma.TemplateWhereInput = projectId !== undefined ? { projectId } : {};
  return paginate(query, {
    cursorField: 'id',
    fetch: ({ cursor, order, take }) => ctx.db.template.findMany({ where: { ...where, ...(cursor ? { id: cursor } : {}) }, orderBy: { id: order }, take }),
    exists: async (id) => (await ctx.db.template.count({ where: { ...where, id } })) > 0,
  });
}

export async function getTemplate(ctx: Ctx, templateId: string, projectFilter?: string | null): Promise<Template> {
  return findVisible(ctx, ctx.db, templateId, await visibleProjectId(ctx, projectFilter));
}

/** Newest first; the cursor is the version number (CONTRACT §10). */
export async function listTemplateVersions(ctx: Ctx, templateId: string, raw: unknown): Promise<Page<TemplateVersion>> {
  const query = parseInput(ListVersionsQuery, raw);
  const template = await findVisible(ctx, ctx.db, templateId, await visibleProjectId(ctx, query.project_id));
  if (query.starting_after !== undefined && query.ending_before !== undefined) {
    throw invalid('ending_before', 'Pass starting_after or ending_before, not both.');
  }
  const limit = query.limit ?? DEFAULT_PAGE_SIZE;
  const cursor = query.starting_after ?? query.ending_before;
  if (cursor !== undefined && !(await store.findVersion(ctx.db, template.id, cursor))) {
    const param = query.starting_after !== undefined ? 'starting_after' : 'ending_before';
    throw invalid(param, `${param} does not name a version of this template.`);
  }
  const where = { templateId: template.id };
  if (query.ending_before !== undefined) {
    const rows = await ctx.db.templateVersion.findMany({ where: { ...where, version: { gt: query.ending_before } }, orderBy: { version: 'asc' }, take: limit + 1 });
    return { data: rows.slice(0, limit).reverse(), hasMore: rows.length > limit, limit };
  }
  const rows = await ctx.db.templateVersion.findMany({
    where: { ...where, ...(query.starting_after !== undefined ? { version: { lt: query.starting_after } } : {}) },
    orderBy: { version: 'desc' },
    take: limit + 1,
  });
  return { data: rows.slice(0, limit), hasMore: rows.length > limit, limit };
}

export async function getTemplateVersion(ctx: Ctx, templateId: string, version: number, projectFilter?: string | null): Promise<TemplateVersion> {
  const template = await findVisible(ctx, ctx.db, templateId, await visibleProjectId(ctx, projectFilter));
  const row = await store.findVersion(ctx.db, template.id, version);
  if (!row) throw versionNotFound();
  return row;
}

/**
 * CONTRACT §10: the messages of a version (default the latest) with the variables filled in; a required variable
 * absent with no default is 400 template_variable_missing, `param` `variables.<name>`.
 */
export async function renderTemplate(ctx: Ctx, templateId: string, raw: unknown): Promise<{ templateId: string; version: number; messages: TemplateMessage[] }> {
  const input = parseInput(RenderTemplate, raw);
  const template = await findVisible(ctx, ctx.db, templateId, await visibleProjectId(ctx, input.project_id));
  const version = input.version ?? template.latestVersion;
  const row = await store.findVersion(ctx.db, template.id, version);
  if (!row) throw versionNotFound();
  return { templateId: template.id, version, messages: renderMessages(versionMessages(row), versionVariables(row), input.variables, 'variables') };
}
