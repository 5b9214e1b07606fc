// `/`: the project's default conversation, for everyone.
import { Landing } from '../components/Landing.tsx';

export default function Home() {
  return <Landing />;
}
