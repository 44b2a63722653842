import type { Prisma, Template, TemplateVersion } from '../../generated/prisma/client.ts';
import type { Db, Tx } from '../../db/client.ts';

/** The templates' SQL. Every read of a template names its project, so isolation does not rest on the caller. */

export function findTemplate(db: Db | Tx, projectId: string | undefined, templateId: string): Promise<Template | null> {
  return db.template.findFirst({ where: { id: templateId, ...(projectId !== undefined ? { projectId } : {}) } });
}

export function findVersion(db: Db | Tx, templateId: string, version: number): Promise<TemplateVersion | null> {
  return db.templateVersion.findUnique({ where: { templateId_version: { templateId, version } } });
}

export function nameTaken(tx: Tx, projectId: string, name: string): Promise<boolean> {
  return tx.template.count({ where: { projectId, name } }).then((n) => n > 0);
}

export function insertTemplate(tx: Tx, data: Prisma.TemplateUncheckedCreateInput): Promise<Template> {
  return tx.template.create({ data });
}

export function insertVersion(tx: Tx, data: Prisma.TemplateVersionUncheckedCreateInput): Promise<TemplateVersion> {
  return tx.templateVersion.create({ data });
}

/** latest_version only moves up: publishing an older number (a gap filled) leaves it. */
export function raiseLatest(tx: Tx, templateId: string, version: number, now: Date): Promise<Template> {
  return tx.template.update({ where: { id: templateId }, data: { updatedAt: now, latestVersion: { set: version } } });
}
