// drizzle-kit config for the PostgreSQL migrations (DATABASE_URL): `npm run db:generate -w @grove/db` writes them into
// ./drizzle-pg (committed) next to the SQLite ones in ./drizzle; both are generated from their schema file together.
import { defineConfig } from 'drizzle-kit';

export default defineConfig({
  dialect: 'postgresql',
  schema: './src/schema-pg.ts',
  out: './drizzle-pg',
});
