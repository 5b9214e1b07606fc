// Unknown URLs get a way back instead of a bare 404.
import Link from 'next/link';
import { Notice, Shell } from '../components/ui.tsx';

export default function NotFound() {
  return (
    <Shell title="Not found">
      <div className="centered">
        <Notice tone="empty" title="There is nothing at this address">
          <p>
            <Link href="/">Go to the conversation</Link> or <Link href="/workspaces">see all workspaces</Link>.
          </p>
        </Notice>
      </div>
    </Shell>
  );
}
