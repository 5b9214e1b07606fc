// "Open this workspace and start it if it is stopped": asked by the URL, the /resume picker and a new
// tab, carried out by whichever conversation shows that workspace (it may not be mounted yet).
const pending = new Set<string>();
const listeners = new Set<() => void>();

export function requestStart(slug: string): void {
  pending.add(slug);
  for (const l of [...listeners]) l();
}

/** True once per request: the caller that takes it does the start. */
export function takeStart(slug: string): boolean {
  return pending.delete(slug);
}

export function hasStartRequest(slug: string): boolean {
  return pending.has(slug);
}

export function onStartRequest(listener: () => void): () => void {
  listeners.add(listener);
  return () => {
    listeners.delete(listener);
  };
}
