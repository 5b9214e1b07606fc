import { createScriptedProvider } from './scripted.ts';
import type { Provider, ProviderName } from './types.ts';

export function createProvider(name: ProviderName, options: { scriptedDelayMs: number }): Provider {
  switch (name) {
    case 'scripted':
      return createScriptedProvider({ delayMs: options.scriptedDelayMs });
  }
}
