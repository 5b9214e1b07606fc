// drizzle-kit config: `npm run db:generate -w @grove/db` writes SQL migrations into ./drizzle (committed).
import { defineConfig } from 'drizzle-kit';

export default defineConfig({
  dialect: 'sqlite',
  schema: './src/schema.ts',
  out: './drizzle',
});
