import { readFileSync } from 'node:fs';
import { rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';

/**
 * The agent's session id, kept next to thread.jsonl so a new container (stop and reopen, a server
 * restart) resumes the same conversation. The host also records it in the registry on stop.
 */
export const SESSION_FILE = 'agent-session.json';

const sessionFileSchema = z.object({ provider: z.string(), sessionId: z.string().min(1), updatedAt: z.string() });

export class SessionFile {
  private readonly path: string;

  constructor(
    threadDir: string,
    private readonly provider: string,
  ) {
    this.path = join(threadDir, SESSION_FILE);
  }

  /** The stored id of this provider's session, or null (none yet, another provider's, unreadable). */
  read(): string | null {
    let text: string;
    try {
      text = readFileSync(this.path, 'utf8');
    } catch {
      return null;
    }
    try {
      const parsed = sessionFileSchema.safeParse(JSON.parse(text));
      return parsed.success && parsed.data.provider === this.provider ? parsed.data.sessionId : null;
    } catch {
      return null;
    }
  }

  /** Replaces the file atomically (write, then rename), so a crash leaves the old id or the new one. */
  async write(sessionId: string | null): Promise<void> {
    const tmp = `${this.path}.tmp`;
    const body = sessionId === null ? {} : { provider: this.provider, sessionId, updatedAt: new Date().toISOString() };
    await writeFile(tmp, `${JSON.stringify(body)}\n`, { mode: 0o644 });
    await rename(tmp, this.path);
  }
}
