// `/p/<project>/w/<name>`: reopens one workspace directly by its URL.
import type { Metadata } from 'next';
import { WorkspaceScreen } from '../../../../../components/WorkspaceScreen.tsx';

interface Params {
  params: Promise<{ project: string; name: string }>;
}

export async function generateMetadata({ params }: Params): Promise<Metadata> {
  const { project, name } = await params;
  return { title: `${name === 'default' ? project : name} · Grove` };
}

/** A malformed escape is left as typed; the screen then says it is not a workspace address. */
function decode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

export default async function WorkspacePage({ params }: Params) {
  const { project, name } = await params;
  return <WorkspaceScreen project={decode(project)} name={decode(name)} />;
}
