import { AUTH_METHODS } from '@mcb/core/db';
import { z } from 'zod';
import { ACTIONS, can, ROLES, type Action } from './roles.ts';
import { route, type RouteRow } from '../web/route-table.ts';

/** `GET /api/whoami`: the operator behind this request, their role, how they signed in, and what they may do. */
export function whoamiRows(): RouteRow[] {
  return [
    route({
      method: 'GET',
      url: '/api/whoami',
      action: 'read',
      schema: {
        summary: 'Who is asking',
        description:
          'The authenticated operator, the role from the operators file (or admin for CONSOLE_TOKEN), and the actions that role allows.',
        tags: ['operators'],
        response: {
          200: z.object({
            name: z.string(),
            role: z.enum(ROLES),
            via: z.enum(AUTH_METHODS),
            may: z.array(z.string()).optional().describe('Actions this role allows (with ?actions=true)'),
            merchants: z
              .array(z.string())
              .optional()
              .describe("The refs of the merchants this operator is scoped to (its entry's `merchants`); absent: all"),
          }),
        },
        querystring: z.strictObject({ actions: z.enum(['true', 'false']).optional() }),
      },
      handler: async (req) => {
        const operator = req.operator!;
        const may =
          req.query.actions === 'true'
            ? (Object.keys(ACTIONS) as Action[]).filter((a) => can(operator.role, a))
            : undefined;
        const scope = operator.scope ? { merchants: [...operator.scope.refs] } : {};
        return { name: operator.name, role: operator.role, via: req.authMethod!, ...(may ? { may } : {}), ...scope };
      },
    }),
  ];
}
