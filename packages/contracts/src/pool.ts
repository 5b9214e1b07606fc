import { z } from 'zod';
import { slugSchema } from './names.ts';

/**
 * A warm sandbox's id (the warm pool, docs/architecture.md Lifecycle): made by the host, 12 lowercase hex digits.
 * It names the sandbox's dirs under <home>/pool/<id> and its container until a fork claims it.
 */
export const warmIdSchema = z.string().regex(/^[0-9a-f]{12}$/, { error: 'a warm sandbox id is 12 lowercase hex digits' });
export type WarmId = z.infer<typeof warmIdSchema>;

/** GET /pool of a backend that waits to be claimed: the only thing it answers besides POST /claim. */
export const poolWaitingSchema = z.object({ waiting: z.literal(true), pool: warmIdSchema });
export type PoolWaiting = z.infer<typeof poolWaitingSchema>;

/** POST /claim: the host tells a warm sandbox's backend which workspace it is from now on. */
export const poolClaimRequestSchema = z.object({ slug: slugSchema }).strict();
export type PoolClaimRequest = z.infer<typeof poolClaimRequestSchema>;

/** POST /claim 202: the backend takes the slug and comes back on its socket as that workspace. */
export const poolClaimResponseSchema = z.object({ slug: slugSchema });
export type PoolClaimResponse = z.infer<typeof poolClaimResponseSchema>;
