/** Refuses a URL the gateway may not call (EgressRefused): scheme, private addresses, SVC_EGRESS_ALLOWLIST. */
export interface EgressCheck {
  vetUrl(url: string): Promise<unknown>;
}

/** Encrypts a signing secret at rest, bound to its webhook id. */
export interface SecretSealer {
  seal(secret: string, webhookId: string): string;
}

/** What the webhook service needs from outside the domain. */
export interface WebhookPorts {
  egress: EgressCheck;
  secretBox: SecretSealer;
  /** SVC_MAX_WEBHOOKS_PER_PROJECT. */
  maxWebhooksPerProject: number;
}
