// @grove/sandbox: the SandboxDriver seam and its Docker implementation (the only package that talks to Docker).
export * from './types.ts';
export { createDockerDriver, containerName, LABELS, RUNSC_PIDS_FACTOR, slugFromName, warmName } from './docker.ts';
