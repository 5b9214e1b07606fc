// `/p/<project>/w/<name>`: one workspace as the active tab; opening this address starts it when stopped.
// The layout's cockpit renders the tab (and says so when the address names no workspace).
import type { Metadata } from 'next';

interface Params {
  params: Promise<{ project: string; name: string }>;
}

function decode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

export async function generateMetadata({ params }: Params): Promise<Metadata> {
  const { project, name } = await params;
  return { title: `${name === 'default' ? decode(project) : decode(name)} · Grove` };
}

export default function WorkspacePage() {
  return null;
}
