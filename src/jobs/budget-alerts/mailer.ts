import type { Transporter } from 'nodemailer';
import type { Logger } from 'pino';
import type { Config } from '../../config/config.ts';
import type { BudgetAlertSender } from '../../domain/budgets/ports.ts';
import type { BudgetAlert } from '../../domain/budgets/types.ts';
import type { Deps } from '../../deps.ts';
import { onceAsync } from '../../kernel/once.ts';
import { alertMessage } from './alert-message.ts';

/**
 * Best effort, after the event rows have committed (those are the durable record and reach webhooks at least once):
 * a failed or skipped e-mail is logged, never retried, and never fails the request that crossed the threshold. The
 * e-mails in flight are tracked, for settled() (shutdown, tests).
 */
export class BudgetAlertMailer implements BudgetAlertSender {
  private readonly pending = new Set<Promise<void>>();
  /** nodemailer is loaded with the first e-mail: a deployment without SMTP never holds it (about 3 MB of heap). */
  private readonly transport = onceAsync(async (): Promise<Transporter> => {
    const { createTransport } = await import('nodemailer');
    return createTransport({
      url: this.config.smtpUrl!,
      connectionTimeout: 10_000,
      greetingTimeout: 10_000,
      socketTimeout: 20_000,
    } as Parameters<typeof createTransport>[0]);
  });

  constructor(
    private readonly config: Pick<Readonly<Config>, 'smtpUrl' | 'alertEmailFrom' | 'alertEmailTo'>,
    private readonly log: Logger,
  ) {}

  send(alerts: readonly BudgetAlert[]): void {
    for (const alert of alerts) {
      const p = this.sendOne(alert).finally(() => this.pending.delete(p));
      this.pending.add(p);
    }
  }

  async settled(): Promise<void> {
    await Promise.all([...this.pending]);
  }

  private async sendOne(alert: BudgetAlert): Promise<void> {
    const { config, log } = this;
    if (!config.smtpUrl) {
      log.info({ alert: alert.type, projectId: alert.projectId, keyId: alert.keyId }, 'budget alert e-mail skipped: SVC_SMTP_URL is not set');
      return;
    }
    const from = config.alertEmailFrom ?? 'svc-gateway@localhost';
    const to = config.alertEmailTo.length > 0 ? config.alertEmailTo : [from];
    const { subject, text } = alertMessage(alert);
    try {
      await (await this.transport()).sendMail({
        from,
        to,
        subject,
        text,
        headers: { 'X-Svc-Project': alert.projectId, 'X-Svc-Event': alert.type },
      });
    } catch (err) {
      log.warn({ err: (err as Error).message, alert: alert.type, projectId: alert.projectId }, 'budget alert e-mail could not be sent');
    }
  }
}

/** Persists the outcomes accepted so far (their alerts fire in that batch), then waits for the e-mails (shutdown, tests). */
export async function flushBudgetAlerts(deps: Pick<Deps, 'outcomes' | 'budgetAlerts'>): Promise<void> {
  await deps.outcomes.flush();
  await deps.budgetAlerts.settled();
}
