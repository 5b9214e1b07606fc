// The workspace terminal API (backend, through /w/<slug>/terminals): create, list, close, and the socket's control frame.
import { z } from 'zod';

/** At most this many terminals per workspace; one more is terminal_limit (429). */
export const MAX_TERMINALS = 8;
/** Output kept per terminal and replayed to each new socket, so a reload sees what was there. */
export const TERMINAL_SCROLLBACK_BYTES = 256 * 1024;

const cols = z.number().int().min(2).max(1000);
const rows = z.number().int().min(1).max(1000);

export const terminalIdSchema = z.string().regex(/^t[0-9a-f]{16}$/, { error: 'not a terminal id' });

export const createTerminalRequestSchema = z.object({ cols, rows }).strict();
export type CreateTerminalRequest = z.infer<typeof createTerminalRequestSchema>;

export const terminalInfoSchema = z.object({
  id: terminalIdSchema,
  cols,
  rows,
  createdAt: z.string(),
});
export type TerminalInfo = z.infer<typeof terminalInfoSchema>;

export const createTerminalResponseSchema = z.object({ id: terminalIdSchema });
export type CreateTerminalResponse = z.infer<typeof createTerminalResponseSchema>;

export const terminalListResponseSchema = z.object({ terminals: z.array(terminalInfoSchema) });
export type TerminalListResponse = z.infer<typeof terminalListResponseSchema>;

/**
 * A text frame on /terminals/:id/socket that parses as this is control; every other frame (binary, or text that
 * is not this JSON) is keyboard input. The browser sends keystrokes as binary frames, so they are never parsed.
 */
export const terminalControlSchema = z.object({ type: z.literal('resize'), cols, rows }).strict();
export type TerminalControl = z.infer<typeof terminalControlSchema>;

/** The close reason the socket carries when the shell exited (code 4000); the terminal is gone then. */
export const TERMINAL_EXIT_CLOSE_CODE = 4000;
