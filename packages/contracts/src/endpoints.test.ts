import { describe, expect, expectTypeOf, it } from 'vitest';
import type { z } from 'zod';
import { errorCodeSchema } from './errors.ts';
import {
  COMMON_ERROR_CODES,
  endpointPath,
  endpoints,
  pathParamNames,
  responseSchemaFor,
  type EndpointBody,
  type EndpointParams,
  type EndpointRequest,
  type EndpointResponse,
  type EndpointSpec,
  type Endpoints,
} from './endpoints.ts';

const table = Object.entries(endpoints) as Array<[string, EndpointSpec]>;

describe('the endpoint table', () => {
  it.each(table)('%s declares exactly the parameters its path names', (_, e) => {
    expect(Object.keys(e.params ?? {}).sort()).toEqual(pathParamNames(e.path).sort());
  });

  it.each(table)('%s answers only codes from the closed set, each once', (_, e) => {
    for (const code of [...e.errors, ...COMMON_ERROR_CODES]) expect(errorCodeSchema.safeParse(code).success, code).toBe(true);
    expect(new Set(e.errors).size).toBe(e.errors.length);
  });

  it.each(table)('%s lists the codes its own input checks answer', (_, e) => {
    const inputCodes = new Set<string>([...Object.values(e.params ?? {}).map((p) => p.code)]);
    if (e.query || e.body) inputCodes.add('invalid_input');
    if (e.body?.nameFields?.length) inputCodes.add('invalid_name');
    for (const code of inputCodes) expect(e.errors, code).toContain(code);
  });

  it('has one entry per method and path, all under /api/', () => {
    const keys = table.map(([, e]) => `${e.method} ${e.path}`);
    expect(new Set(keys).size).toBe(keys.length);
    for (const [, e] of table) expect(e.path).toMatch(/^\/api\/[a-z:/-]+$/);
  });

  it('answers other success statuses only where it says so', () => {
    expect(responseSchemaFor(endpoints.fork, 201)).toBe(endpoints.fork.response);
    expect(responseSchemaFor(endpoints.fork, 202)).toBe(endpoints.fork.also[202]);
    expect(responseSchemaFor(endpoints.getWorkspace, 202)).toBeNull();
    expect(responseSchemaFor(endpoints.getWorkspace, 201)).toBeNull();
  });

  it('keeps bodies of GET and DELETE out, and names what a refused body is', () => {
    for (const [, e] of table) {
      if (e.method === 'GET' || e.method === 'DELETE') expect(e.body).toBeUndefined();
      if (e.body) expect(e.body.what).toMatch(/^[a-z ]+$/);
    }
  });

  it('builds paths with parameters encoded and the query after them', () => {
    expect(endpointPath(endpoints.turnDiff, { params: { slug: 'demo~x', n: 3 } })).toBe('/api/workspaces/demo~x/turns/3/diff');
    expect(endpointPath(endpoints.getWorkspace, { params: { slug: '../x' } })).toBe('/api/workspaces/..%2Fx');
    expect(endpointPath(endpoints.events, { query: { slug: 'demo~x', after: undefined, limit: 10 } })).toBe('/api/events?slug=demo~x&limit=10');
    expect(endpointPath(endpoints.deleteOverlayFile, { params: { project: 'demo' }, query: { path: '.claude/a b.json' } })).toBe(
      '/api/projects/demo/overlay?path=.claude%2Fa%20b.json',
    );
    expect(endpointPath(endpoints.listProjects)).toBe('/api/projects');
    expect(() => endpointPath(endpoints.getWorkspace, { params: {} })).toThrow(/parameter slug is missing/);
  });

  it('parses path parameters into their types (a turn number is a number)', () => {
    expect(endpoints.turnDiff.params.n.schema.parse('12')).toBe(12);
    expect(endpoints.turnDiff.params.n.schema.safeParse('012').success).toBe(false);
    expect(endpoints.getWorkspace.params.slug.schema.safeParse('Demo').success).toBe(false);
  });

  it('derives request and response types from the schemas', () => {
    expectTypeOf<EndpointParams<Endpoints['turnDiff']>>().toEqualTypeOf<{ slug: string; n: number }>();
    expectTypeOf<EndpointBody<Endpoints['setEgressPolicy']>>().toEqualTypeOf<z.output<typeof endpoints.setEgressPolicy.body.schema>>();
    expectTypeOf<EndpointRequest<Endpoints['getWorkspace']>['params']>().toEqualTypeOf<{ slug: string }>();
    expectTypeOf<EndpointRequest<Endpoints['deleteOverlayFile']>['query']>().toEqualTypeOf<z.output<typeof endpoints.deleteOverlayFile.query>>();
    expectTypeOf<EndpointRequest<Endpoints['deleteOverlayFile']>>().toHaveProperty('query').toExtend<{ path: string }>();
    // A fork answers 201 with the workspace or 202 with where its progress shows; both carry the workspace.
    expectTypeOf<EndpointResponse<Endpoints['fork']>['workspace']['slug']>().toEqualTypeOf<string>();
    expectTypeOf<EndpointResponse<Endpoints['turnDiff']>>().toEqualTypeOf<z.output<typeof endpoints.turnDiff.response>>();
  });
});
