import { createTransport, type Transporter } from 'nodemailer';
import type { Config } from '../../config/config.ts';
import type { Logger } from 'pino';

export interface BudgetAlert {
  type: 'budget.threshold' | 'budget.exceeded';
  keyId: string | null;
  projectId: string;
  budgetUsd: number;
  spentUsd: number;
  threshold: number;
  period: string;
}

const transports = new WeakMap<Readonly<Config>, Transporter>();

function transportFor(config: Readonly<Config>): Transporter {
  let t = transports.get(config);
  if (!t) {
    t = createTransport({
      url: config.smtpUrl!,
      connectionTimeout: 10_000,
      greetingTimeout: 10_000,
      socketTimeout: 20_000,
    } as Parameters<typeof createTransport>[0]);
    transports.set(config, t);
  }
  return t;
}

const usd = (n: number) => `$${n.toFixed(2)}`;

export function alertMessage(alert: BudgetAlert): { subject: string; text: string } {
  const who = alert.keyId ? `API key ${alert.keyId}` : `project ${alert.projectId}`;
  const what =
    alert.type === 'budget.exceeded'
      ? `has reached its monthly budget: further requests are refused with 429 budget_exceeded until the month ends or the budget is raised`
      : `has used ${Math.round(alert.threshold * 100)}% of its monthly budget`;
  return {
    subject: `[svc] ${alert.type === 'budget.exceeded' ? 'Budget exceeded' : `Budget at ${Math.round(alert.threshold * 100)}%`}: ${who} (${alert.period})`,
    text:
      `The ${who} ${what}.\n\n` +
      `Project: ${alert.projectId}\n` +
      (alert.keyId ? `Key: ${alert.keyId}\n` : '') +
      `Period: ${alert.period} (UTC)\n` +
      `Spent: ${usd(alert.spentUsd)} of ${usd(alert.budgetUsd)}\n`,
  };
}

/**
 * Best effort, after the event rows have committed (those are the durable record and reach webhooks at least once):
 * a failed or skipped e-mail is logged, never retried, and never fails the request that crossed the threshold.
 */
export async function sendBudgetAlertEmail(config: Readonly<Config>, log: Logger, alert: BudgetAlert): Promise<void> {
  if (!config.smtpUrl) {
    log.info({ alert: alert.type, projectId: alert.projectId, keyId: alert.keyId }, 'budget alert e-mail skipped: SVC_SMTP_URL is not set');
    return;
  }
  const from = config.alertEmailFrom ?? 'svc-gateway@localhost';
  const to = config.alertEmailTo.length > 0 ? config.alertEmailTo : [from];
  const { subject, text } = alertMessage(alert);
  try {
    await transportFor(config).sendMail({
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
