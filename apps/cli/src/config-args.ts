// `grove project config --set key=<json> --unset key`: the options turned into a PATCH body (pure, no I/O).

/** A bad --set or --unset: main turns it into a usage error (exit 2). */
export class ConfigArgError extends Error {}

/**
 * Each `--set key=<json>` becomes that key with the parsed value, each `--unset key` becomes `null` (back to the
 * default). Values are JSON because every key of a project config holds a boolean, a list or an object; the
 * server checks keys and values with the contracts schema.
 */
export function configPatch(sets: readonly string[], unsets: readonly string[]): Record<string, unknown> {
  const patch: Record<string, unknown> = {};
  const once = (key: string, flag: string): void => {
    if (!/^[A-Za-z][A-Za-z0-9]*$/.test(key)) throw new ConfigArgError(`${flag} ${key}: a key is a name like keepCheckoutOnClose`);
    if (Object.hasOwn(patch, key)) throw new ConfigArgError(`${flag} ${key}: ${key} is given twice`);
  };
  for (const s of sets) {
    const eq = s.indexOf('=');
    if (eq < 1) throw new ConfigArgError(`--set ${s}: expected key=<json>, e.g. --set keepCheckoutOnClose=true`);
    const key = s.slice(0, eq);
    once(key, '--set');
    try {
      patch[key] = JSON.parse(s.slice(eq + 1)) as unknown;
    } catch {
      throw new ConfigArgError(`--set ${key}: the value is not JSON (a list is '["src/**"]', an object '{"authorName":"Ada"}')`);
    }
  }
  for (const key of unsets) {
    once(key, '--unset');
    patch[key] = null;
  }
  return patch;
}
