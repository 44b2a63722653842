import type { FastifyPluginAsync } from 'fastify';
import { publicRoutes } from '../hooks/auth.ts';
import { SCIM_BASE, sendScimError } from './scim/responses.ts';

const PATHS: [method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE', path: string][] = [
  ...(['Users', 'Groups'] as const).flatMap((name) => [
    ['GET', `${SCIM_BASE}/${name}`],
    ['POST', `${SCIM_BASE}/${name}`],
    ['GET', `${SCIM_BASE}/${name}/:id`],
    ['PUT', `${SCIM_BASE}/${name}/:id`],
    ['PATCH', `${SCIM_BASE}/${name}/:id`],
    ['DELETE', `${SCIM_BASE}/${name}/:id`],
  ] as [method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE', path: string][]),
  ['GET', `${SCIM_BASE}/ServiceProviderConfig`],
  ['GET', `${SCIM_BASE}/ResourceTypes`],
  ['GET', `${SCIM_BASE}/Schemas`],
];

/**
 * SCIM 2.0 for operators and groups (api/routes/scim/scimmy.ts). Without SVC_SCIM_TOKEN(_SHA256) every SCIM path answers a
 * SCIM 404, and scimmy is not even loaded (it is a start-up cost only deployments using SCIM pay).
 */
export const scimRoutes: FastifyPluginAsync = async (app) => {
  // SCIM checks its own bearer token (SVC_SCIM_TOKEN), not a project key.
  publicRoutes(app);
  const tokenHash = app.deps.config.operators.scimTokenHash;
  if (tokenHash !== null) {
    const { registerScim } = await import('./scim/scimmy.ts');
    await registerScim(app, tokenHash);
    return;
  }
  for (const [method, url] of PATHS) {
    app.route({ method, url, handler: async (_req, reply) => sendScimError(reply, 404, 'SCIM provisioning is not configured (SVC_SCIM_TOKEN).') });
  }
};
