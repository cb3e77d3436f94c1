import { test, expect } from './harness';

// Contract section 2: a browser request from another origin is refused. The
// check lives in the API's edge (internal/httpapi), not in the app.
test('a request from another origin is refused with 403 forbidden_origin', async ({ env }) => {
  const evil = await env.tandem.api('GET', '/v1/workspaces', undefined, { Origin: 'http://evil.example' });
  expect(evil.status).toBe(403);
  expect(evil.body.error.code).toBe('forbidden_origin');

  const evilPost = await env.tandem.api('POST', '/v1/workspaces', { path: env.workDir }, { Origin: 'http://127.0.0.1:1' });
  expect(evilPost.status).toBe(403);
  expect(evilPost.body.error.code).toBe('forbidden_origin');
  expect((await env.tandem.must('GET', '/v1/workspaces')).workspaces).toEqual([]);

  // The app's own origin is served.
  const own = await env.tandem.api('GET', '/v1/workspaces', undefined, { Origin: env.tandem.url });
  expect(own.status).toBe(200);
});
