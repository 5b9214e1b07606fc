// `/resume`: the resume picker as a page of its own, so the address can be typed or bookmarked.
import type { Metadata } from 'next';
import { ResumePage } from '../../components/ResumePage.tsx';

export const metadata: Metadata = { title: 'Resume · Grove' };

export default function Page() {
  return <ResumePage />;
}
