import { z } from 'zod';

/**
 * One line of a workspace's thread.jsonl. Every line has a monotonically increasing `seq`, the turn it
 * belongs to, and a timestamp. Lines are appended and fsynced before they are acknowledged.
 */
const base = { seq: z.number().int().nonnegative(), turn: z.string().min(1), at: z.string() };

export const threadLineSchema = z.discriminatedUnion('kind', [
  z.object({ ...base, kind: z.literal('user'), text: z.string() }),
  z.object({ ...base, kind: z.literal('assistant'), text: z.string() }),
  z.object({ ...base, kind: z.literal('tool_call'), callId: z.string(), tool: z.string(), input: z.unknown() }),
  z.object({ ...base, kind: z.literal('tool_result'), callId: z.string(), output: z.string(), isError: z.boolean() }),
  z.object({ ...base, kind: z.literal('error'), message: z.string() }),
  z.object({ ...base, kind: z.literal('turn_end'), status: z.enum(['completed', 'failed', 'cancelled']) }),
  /** Provider events Grove does not model yet are kept verbatim, never dropped. */
  z.object({ ...base, kind: z.literal('raw'), provider: z.string(), event: z.unknown() }),
]);
export type ThreadLine = z.infer<typeof threadLineSchema>;
export type ThreadLineKind = ThreadLine['kind'];

export const postMessageRequestSchema = z.object({ text: z.string().min(1, { error: 'text must not be empty' }).max(100_000) }).strict();
export type PostMessageRequest = z.infer<typeof postMessageRequestSchema>;

export const postMessageResponseSchema = z.object({ turn: z.string(), seq: z.number().int() });
export type PostMessageResponse = z.infer<typeof postMessageResponseSchema>;

/** 202 from POST /turn/cancel: the turn being stopped (its turn_end 'cancelled' follows on the stream). */
export const cancelTurnResponseSchema = z.object({ turn: z.string() });
export type CancelTurnResponse = z.infer<typeof cancelTurnResponseSchema>;

export const threadResponseSchema = z.object({ lines: z.array(threadLineSchema) });
export type ThreadResponse = z.infer<typeof threadResponseSchema>;

export const backendHealthSchema = z.object({ ok: z.literal(true), slug: z.string(), provider: z.string() });
export type BackendHealth = z.infer<typeof backendHealthSchema>;

export const backendStatusSchema = z.object({
  slug: z.string(),
  provider: z.string(),
  busy: z.boolean(),
  currentTurn: z.string().nullable(),
  lines: z.number().int(),
  lastSeq: z.number().int(),
  agentSessionId: z.string().nullable(),
  uptimeMs: z.number(),
});
export type BackendStatus = z.infer<typeof backendStatusSchema>;

/** Frames on the backend's WebSocket /stream. */
export const streamFrameSchema = z.discriminatedUnion('type', [
  /** First frame: the seq of the last line already in the thread, so a client can fetch what it missed. */
  z.object({ type: z.literal('hello'), lastSeq: z.number().int(), busy: z.boolean() }),
  /** A chunk of assistant text as it is produced (not yet a thread line). */
  z.object({ type: z.literal('delta'), turn: z.string(), text: z.string() }),
  /** A line that was just appended to the thread. */
  z.object({ type: z.literal('line'), line: threadLineSchema }),
]);
export type StreamFrame = z.infer<typeof streamFrameSchema>;

/** GET /ports on the backend: TCP ports listening inside the container, and whether /preview/<port>/ may reach each. */
export const listeningPortSchema = z.object({
  port: z.number().int().min(1).max(65535),
  /** Local addresses it listens on, e.g. 127.0.0.1, 0.0.0.0, ::1, ::. */
  addresses: z.array(z.string()),
  /** On the preview allowlist (and not one of the backend's own ports). */
  preview: z.boolean(),
});
export type ListeningPort = z.infer<typeof listeningPortSchema>;

/** A port as it appears in a preview URL (/w/<slug>/preview/<port>/, /pv/<cap>/<slug>/<port>/): 1-65535, no sign, no leading zero. */
export const previewPortParamSchema = z
  .string()
  .regex(/^[1-9][0-9]{0,4}$/, { error: 'port must be a number between 1 and 65535' })
  .transform(Number)
  .refine((n) => n <= 65535, { error: 'port must be a number between 1 and 65535' });

export const portsResponseSchema = z.object({ ports: z.array(listeningPortSchema) });
export type PortsResponse = z.infer<typeof portsResponseSchema>;

/**
 * GET /api/workspaces/:slug/preview/:port: the stable address of a port's preview on the preview origin
 * (<origin>/pv/<cap>/<slug>/<port>/), what /w/<slug>/preview/<port>/ redirects to. The dashboard frames it directly, so
 * nothing of the preview is ever loaded on the dashboard's own origin, not even a redirect.
 */
export const previewUrlResponseSchema = z.object({ port: z.number().int().min(1).max(65535), url: z.url({ protocol: /^https?$/ }) });
export type PreviewUrlResponse = z.infer<typeof previewUrlResponseSchema>;
