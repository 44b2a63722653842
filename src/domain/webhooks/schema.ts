import { Type, type Static } from 'typebox';
import { says } from '../../config/schema-errors.ts';
import { EVENT_TYPES } from '../events/outbox.ts';
import { pageQueryProperties } from '../pagination.ts';
import { Input, PathId, ProjectIdField, ProjectIdFilter } from '../schema.ts';

export const MAX_URL_LENGTH = 2048;

/**
 * POST /v1/webhooks, GraphQL createWebhook. Checked by the service besides: https, a valid absolute URL, no
 * credentials, an address that is not private (CONTRACT §6), the per-project cap.
 */
export const CreateWebhook = Input({
  project_id: ProjectIdField,
  url: Type.String({
    minLength: 1,
    maxLength: MAX_URL_LENGTH,
    // A URL parser drops spaces and control characters at the ends and some inside; the url is stored as sent, so it
    // must be exactly what is called.
    pattern: '^[^\\s\\u0000-\\u001f\\u007f]*$',
    description: `The HTTPS endpoint events are POSTed to, at most ${MAX_URL_LENGTH} characters; private addresses are refused unless allowlisted.`,
    ...says({
      type: `must be an HTTPS URL of at most ${MAX_URL_LENGTH} characters`,
      minLength: 'must be a valid absolute URL',
      maxLength: `must be an HTTPS URL of at most ${MAX_URL_LENGTH} characters`,
      pattern: 'must be a valid absolute URL without spaces or control characters',
    }),
  }),
  events: Type.Array(Type.Enum(EVENT_TYPES, says(`has an unknown event type: {raw} (known types: ${EVENT_TYPES.join(', ')})`)), {
    minItems: 1,
    description: 'The event types the webhook receives (spec 2.4).',
    ...says({ type: 'must be a non-empty array of event types', minItems: 'must be a non-empty array of event types' }),
  }),
});
export type CreateWebhook = Static<typeof CreateWebhook>;

/** GET /v1/webhooks and GET /v1/webhooks/{webhook_id}/deliveries, GraphQL webhooks. */
export const ListWebhooksQuery = Input({ ...pageQueryProperties(), project_id: ProjectIdFilter });
export type ListWebhooksQuery = Static<typeof ListWebhooksQuery>;
export const ListDeliveriesQuery = ListWebhooksQuery;

export const WebhookIdParams = PathId('webhook_id', 'The webhook\'s id (wh_…).');
export const DeliveryParams = Type.Object({
  webhook_id: Type.String({ description: 'The webhook\'s id (wh_…).' }),
  delivery_id: Type.String({ description: 'The delivery\'s id (del_…).' }),
});
