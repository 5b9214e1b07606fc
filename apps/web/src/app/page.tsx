// `/`: the project's default conversation, for everyone (`/?project=<name>`: that project's).
import { Suspense } from 'react';
import { Landing, LandingOpening } from '../components/Landing.tsx';

export default function Home() {
  // Landing reads the query string, which a prerendered page only knows in the browser.
  return (
    <Suspense fallback={<LandingOpening />}>
      <Landing />
    </Suspense>
  );
}
