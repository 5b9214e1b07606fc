/** In-process FIFO mutex per key. Callers queue on a promise chain instead of polling. */
export class KeyedMutex {
  private readonly tails = new Map<string, Promise<void>>();

  /**
   * Wait for the key; resolves with a release function. With timeoutMs, rejects with MutexTimeout when the
   * previous holders have not finished in time (the queue stays intact for those behind us).
   */
  async acquire(key: string, timeoutMs?: number): Promise<() => void> {
    const prev = this.tails.get(key) ?? Promise.resolve();
    let release!: () => void;
    const mine = new Promise<void>((r) => (release = r));
    const tail = prev.then(() => mine);
    this.tails.set(key, tail);
    // Forget the key only once everything queued up to us has settled, so a later caller never skips
    // a holder that is still running.
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    let released = false;
    const done = (): void => {
      if (released) return;
      released = true;
      release();
    };
    if (timeoutMs === undefined) {
      await prev;
      return done;
    }
    let timer: NodeJS.Timeout | undefined;
    const inTime = await Promise.race([
      prev.then(() => true),
      new Promise<boolean>((r) => (timer = setTimeout(() => r(false), Math.max(0, timeoutMs)))),
    ]);
    clearTimeout(timer);
    if (!inTime) {
      done();
      throw new MutexTimeout(key);
    }
    return done;
  }

  async run<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const release = await this.acquire(key);
    try {
      return await fn();
    } finally {
      release();
    }
  }

  isBusy(key: string): boolean {
    return this.tails.has(key);
  }
}

export class MutexTimeout extends Error {
  constructor(key: string) {
    super(`timed out waiting for ${key}`);
    this.name = 'MutexTimeout';
  }
}
