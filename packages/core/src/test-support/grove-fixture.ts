// Test helper: the setup of the lifecycle test files that run createGrove on the in-memory sandbox driver: a fresh
// home and source repository per test, the groves a test opened closed after it, and, for files that run on
// PostgreSQL too, one throwaway cluster per file.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTestPostgres } from '@grove/db';
import type { TestPostgres } from '@grove/db';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, beforeEach } from 'vitest';
import type { Grove } from '../index.ts';
import { createTestGrove } from './test-grove.ts';
import type { TestGroveOptions } from './test-grove.ts';
import { FakeDriver } from './fake-driver.ts';
import { makeSourceRepo } from './repo.ts';

export interface GroveFixtureOptions {
  /** Prefix of the per-test temp dir, so a leftover dir names the file that made it. */
  tmpPrefix: string;
  /**
   * pino level of every grove opened; undefined: silent. The test file passes GROVE_TEST_LOG, because only
   * tests and env.ts files read process.env.
   */
  logLevel: string | undefined;
  /** What every open() passes on top of the shared settings, before the test's own overrides. */
  defaults: Pick<TestGroveOptions, 'maxRunning'> & Partial<TestGroveOptions>;
  /**
   * Name of the databases usePostgres() creates, and whether the file starts a PostgreSQL cluster at all
   * (starting one takes seconds, so files that only use SQLite leave this out).
   */
  postgresDatabase?: string;
  /** How long until() waits when the call does not say; 5 s unless the file asks for more. */
  untilMs?: number;
  /**
   * Called after each test before its groves are closed: a test that failed while holding an operation open
   * (e.g. a gated ensure in the fake driver) must release it first, or close() would wait for it forever.
   */
  beforeClose?: () => void;
}

export interface GroveFixture {
  /** The current test's temp dir; removed after it. */
  readonly tmp: string;
  /** The state root the groves of the current test share (<tmp>/home). */
  readonly home: string;
  /** A source repository made by makeSourceRepo (<tmp>/src). */
  readonly source: string;
  /** The current test's in-memory engine, shared by every grove it opens (several servers on one host). */
  readonly driver: FakeDriver;
  /**
   * Groves open() made in the current test, closed after it. A test that closes them itself (a server that
   * "crashed") empties it, so they are not closed twice.
   */
  readonly groves: Grove[];
  /** The registry open() uses: null, SQLite in the home, unless usePostgres() ran for the current test. */
  readonly databaseUrl: string | null;
  /** createGrove with the shared settings, the file's defaults and then `over`. */
  open(over?: Partial<TestGroveOptions>): Promise<Grove>;
  /** open() with the project `demo` added from `source`, without its default workspace. */
  withProject(over?: Partial<TestGroveOptions>): Promise<Grove>;
  /** The current test's registry is a fresh database on the file's PostgreSQL cluster. */
  usePostgres(): Promise<void>;
  /** Polls fn every 20 ms until it returns a truthy value, which it returns; throws after ms (the file's default). */
  until<T>(fn: () => Promise<T | undefined | false>, ms?: number): Promise<T>;
}

/**
 * Registers the hooks of a test file and returns what its tests use. Call it once, at the top level of the file:
 * the hooks apply to every test in it.
 */
export function useGroveFixture(options: GroveFixtureOptions): GroveFixture {
  const { tmpPrefix, logLevel, defaults, postgresDatabase, untilMs = 5_000, beforeClose } = options;
  let tmp = '';
  let driver: FakeDriver | undefined;
  let databaseUrl: string | null = null;
  let cluster: TestPostgres | undefined;
  const groves: Grove[] = [];

  if (postgresDatabase !== undefined) {
    beforeAll(async () => {
      cluster = await startTestPostgres();
    });
    afterAll(async () => {
      await cluster?.stop();
    });
  }

  beforeEach(() => {
    databaseUrl = null;
    tmp = mkdtempSync(join(tmpdir(), tmpPrefix));
    makeSourceRepo(join(tmp, 'src'));
    driver = new FakeDriver();
  });
  afterEach(async () => {
    beforeClose?.();
    for (const g of groves.splice(0)) await g.close();
    await driver?.closeAll();
    rmSync(tmp, { recursive: true, force: true });
  });

  const fixture: GroveFixture = {
    get tmp() {
      return tmp;
    },
    get home() {
      return join(tmp, 'home');
    },
    get source() {
      return join(tmp, 'src');
    },
    get driver() {
      if (!driver) throw new Error('the grove fixture is used outside a test');
      return driver;
    },
    groves,
    get databaseUrl() {
      return databaseUrl;
    },
    async open(over = {}) {
      const g = await createTestGrove({
        home: fixture.home,
        driver: fixture.driver,
        image: 'grove-sandbox:test',
        logger: pino({ level: logLevel ?? 'silent' }),
        healthTimeoutMs: 1_500,
        databaseUrl,
        ...defaults,
        ...over,
      });
      groves.push(g);
      return g;
    },
    async withProject(over = {}) {
      const g = await fixture.open(over);
      await g.addProject({ name: 'demo', source: fixture.source, createDefault: false });
      return g;
    },
    async usePostgres() {
      if (postgresDatabase === undefined) throw new Error('usePostgres() needs postgresDatabase in the useGroveFixture options');
      if (!cluster) throw new Error('the test PostgreSQL cluster did not start');
      databaseUrl = await cluster.createDatabase(postgresDatabase);
    },
    async until<T>(fn: () => Promise<T | undefined | false>, ms = untilMs): Promise<T> {
      const end = Date.now() + ms;
      for (;;) {
        const v = await fn();
        if (v) return v;
        if (Date.now() > end) throw new Error('condition not met in time');
        await new Promise((r) => setTimeout(r, 20));
      }
    },
  };
  return fixture;
}
