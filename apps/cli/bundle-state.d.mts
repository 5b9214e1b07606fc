/** Whether dist/grove.mjs may run (bundle-state.mjs). */
export function bundleIsFresh(base?: URL): boolean;
