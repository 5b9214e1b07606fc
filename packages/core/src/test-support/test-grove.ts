// Test helper: createGrove with the Docker runtime built around the given driver (the real Docker driver, or the
// in-memory FakeDriver), from the options tests used to pass to core before the runtime seam existed.
import { createDockerRuntime } from '@grove/runtime';
import type { DockerRuntimeOptions, EgressGateOptions } from '@grove/runtime';
import type { SandboxDriver } from '@grove/sandbox';
import { createGrove } from '../grove.ts';
import type { EgressOptions } from '../egress.ts';
import type { Grove, GroveOptions } from '../types.ts';

export interface TestGroveOptions extends Omit<GroveOptions, 'runtime' | 'egress'> {
  driver: SandboxDriver;
  image: string;
  healthTimeoutMs?: number;
  providerRelay?: DockerRuntimeOptions['providerRelay'];
  /** Core's default rules and the runtime's gate hooks, in one object as before. */
  egress?: EgressOptions & EgressGateOptions;
}

/** Split test options into the runtime's and core's. */
export function groveOptions(o: TestGroveOptions): GroveOptions {
  const { driver, image, healthTimeoutMs, providerRelay, egress, ...core } = o;
  const { defaultRules, ...gate } = egress ?? {};
  const runtime = createDockerRuntime({
    driver,
    image,
    logger: o.logger,
    ...(healthTimeoutMs !== undefined ? { healthTimeoutMs } : {}),
    ...(providerRelay ? { providerRelay } : {}),
    ...(egress ? { egress: gate } : {}),
  });
  return { ...core, runtime, ...(defaultRules ? { egress: { defaultRules } } : {}) };
}

export function createTestGrove(o: TestGroveOptions): Promise<Grove> {
  return createGrove(groveOptions(o));
}
