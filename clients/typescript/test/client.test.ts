// The client against the real HTTP API (internal/devtools/tsclient runs
// it in-process, with the kinds of internal/devtools/apitest, and gives
// its URL in LAMBDAJOBS_API), and its SigV4 signing.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { test } from "node:test";
import { createJobsClient, enqueueUpload, isFinal, must, ProblemError, sigv4Fetch, UploadError, waitForJob, type Job } from "../src/index.js";

const api = process.env.LAMBDAJOBS_API ?? "";
if (api === "" && process.env.CI) {
  throw new Error("LAMBDAJOBS_API is not set: run these tests through internal/devtools/tsclient, which starts the API");
}
const secret = "tok-5d1e8a2f";

test("a job is enqueued, waited for and read, its secret field never shown", { skip: api === "" ? "LAMBDAJOBS_API is not set" : false }, async () => {
  const c = createJobsClient({ baseUrl: api, caller: "ts" });
  const job = must(await c.POST("/v1/jobs", { body: { kind: "greet", payload: { name: "ana", token: secret } } }));
  assert.equal(job.status, "queued");
  const seen: string[] = [];
  const done = await waitForJob(c, job.id, { intervalMs: 20, timeoutMs: 20_000, onChange: (j: Job) => seen.push(j.status) });
  assert.equal(done.status, "succeeded");
  assert.equal(done.result, "hello ana");
  assert.ok(isFinal(done) && seen.at(-1) === "succeeded");
  const read = JSON.stringify(must(await c.GET("/v1/jobs/{id}", { params: { path: { id: job.id } } })));
  assert.ok(!read.includes(secret) && read.includes('"token":"[secret]"'), `the job's view shows its secret field: ${read}`);
  const page = must(await c.GET("/v1/jobs", { params: { query: { kind: "greet" } } }));
  assert.ok(page.jobs.some((j: Job) => j.id === job.id));
});

test("problems are ProblemErrors with their status and code", { skip: api === "" ? "LAMBDAJOBS_API is not set" : false }, async () => {
  const c = createJobsClient({ baseUrl: api, caller: "ts" });
  assert.throws(
    () => must({ error: { code: "x" }, response: new Response(null, { status: 500 }) }),
    (e: unknown) => e instanceof ProblemError && e.status === 500,
  );
  const bad = await c.POST("/v1/jobs", { body: { kind: "greet", payload: { name: "x", nmae: "typo" } } });
  assert.throws(() => must(bad), (e: unknown) => e instanceof ProblemError && e.status === 422 && e.code === "invalid_payload");
  const unknown = await c.POST("/v1/jobs", { body: { kind: "internal.cleanup", payload: {} } });
  assert.throws(() => must(unknown), (e: unknown) => e instanceof ProblemError && e.status === 422 && e.code === "unknown_kind");
  const mine = must(await c.POST("/v1/jobs", { body: { kind: "approve", payload: {} } }));
  const other = createJobsClient({ baseUrl: api, caller: "someone-else" });
  const theirs = await other.GET("/v1/jobs/{id}", { params: { path: { id: mine.id } } });
  assert.throws(() => must(theirs), (e: unknown) => e instanceof ProblemError && e.status === 404 && e.code === "not_found");
  // Cancelled while queued, or, when a worker claimed it first (it runs
  // in-process beside this test), marked and ended at its next check.
  const cancelled = must(await c.POST("/v1/jobs/{id}/cancel", { params: { path: { id: mine.id } } }));
  assert.ok(cancelled.status === "cancelled" || (cancelled.status === "running" && cancelled.cancel_requested === true), `the cancel answered ${JSON.stringify(cancelled)}`);
  await assert.rejects(waitForJob(c, "00000000-0000-7000-8000-000000000000"), (e: unknown) => e instanceof ProblemError && e.status === 404);
});

test("waiting stops at its timeout", { skip: api === "" ? "LAMBDAJOBS_API is not set" : false }, async () => {
  const c = createJobsClient({ baseUrl: api, caller: "ts" });
  const job = must(await c.POST("/v1/jobs", { body: { kind: "approve", payload: {} } }));
  await assert.rejects(waitForJob(c, job.id, { intervalMs: 10, timeoutMs: 100 }), (e: unknown) => e instanceof DOMException && e.name === "TimeoutError");
  const signalled = await c.POST("/v1/jobs/{id}/signals/{name}", { params: { path: { id: job.id, name: "approval" } }, body: true as never });
  assert.ok(signalled.response.ok, `signal: ${signalled.response.status}`);
  const done = await waitForJob(c, job.id, { intervalMs: 20, timeoutMs: 20_000 });
  assert.equal(done.result, true);
});

test("a wait answers as soon as the job changes", { skip: api === "" ? "LAMBDAJOBS_API is not set" : false }, async () => {
  const c = createJobsClient({ baseUrl: api, caller: "ts" });
  const job = must(await c.POST("/v1/jobs", { body: { kind: "approve", payload: {} } }));
  let etag = "";
  let parked = job;
  while (parked.waiting_on !== "signal") {
    await new Promise((resolve) => setTimeout(resolve, 20));
    const answer = await c.GET("/v1/jobs/{id}", { params: { path: { id: job.id } } });
    parked = must(answer);
    etag = answer.response.headers.get("ETag") ?? "";
  }
  assert.ok(etag.startsWith('"'), `GET's ETag ${etag}`);
  const start = Date.now();
  setTimeout(() => void c.POST("/v1/jobs/{id}/signals/{name}", { params: { path: { id: job.id, name: "approval" } }, body: true as never }), 300);
  const answer = await c.GET("/v1/jobs/{id}/wait", { params: { path: { id: job.id }, query: { timeout: 15 }, header: { "If-None-Match": etag } } });
  const changed = must(answer);
  const took = Date.now() - start;
  assert.ok(took >= 300 && took < 3000, `the wait answered after ${took} ms; the job changed at 300 ms`);
  // The change is the signal's wake (due at once, waiting on nothing)
  // or the run after it: a new version either way.
  assert.notEqual(answer.response.headers.get("ETag"), etag);
  assert.ok(changed.waiting_on === undefined && (changed.run_at !== parked.run_at || changed.status !== "queued"), `the wait answered ${JSON.stringify(changed)}`);
  const bad = await c.GET("/v1/jobs/{id}/wait", { params: { path: { id: job.id }, query: { timeout: 99 } } });
  assert.throws(() => must(bad), (e: unknown) => e instanceof ProblemError && e.status === 400 && e.code === "invalid_request");

  // waitForJob waits for changes rather than reading again and again.
  const paths: string[] = [];
  const counted = createJobsClient({ baseUrl: api, caller: "ts", fetch: ((req: Request) => (paths.push(new URL(req.url).pathname), fetch(req))) as typeof fetch });
  const next = must(await counted.POST("/v1/jobs", { body: { kind: "approve", payload: {} } }));
  const began = Date.now();
  setTimeout(() => void c.POST("/v1/jobs/{id}/signals/{name}", { params: { path: { id: next.id, name: "approval" } }, body: true as never }), 1000);
  const done = await waitForJob(counted, next.id, { intervalMs: 10, timeoutMs: 20_000 });
  assert.equal(done.result, true);
  assert.ok(Date.now() - began >= 1000, "the job ended before its signal");
  // Reading every 10 ms would have read it about 100 times over that
  // second. One wait may span it all: the parked job's next version a
  // quarter-second poll sees can be its end, when a worker claims and
  // runs it between two polls.
  const reads = paths.filter((p) => p === `/v1/jobs/${next.id}`).length;
  const waits = paths.filter((p) => p === `/v1/jobs/${next.id}/wait`).length;
  assert.ok(reads === 1 && waits >= 1 && waits <= 5, `waitForJob read the job ${reads} times and waited ${waits} times over a second`);
});

test("a payload past a request goes up in parts and makes one job", { skip: api === "" ? "LAMBDAJOBS_API is not set" : false }, async () => {
  const c = createJobsClient({ baseUrl: api, caller: "ts" });
  // The in-process API keeps uploads in memory: a part's link is
  // mem://uploads/..., which its server takes at /_parts/uploads/...
  // (refusing a PUT with credentials, as S3 does a presigned one).
  const puts: string[] = [];
  const partFetch = ((url: RequestInfo | URL, init?: RequestInit) => {
    const link = String(url);
    puts.push(link);
    return fetch(link.replace(/^mem:\/\//, `${api}/_parts/`), init);
  }) as typeof fetch;
  const text = "lambdajobs ".repeat(900_000); // 9.9 MB: two parts of 8 MiB at most
  const data = new TextEncoder().encode(JSON.stringify({ text }));
  const parts: number[] = [];
  const opts = { partFetch, intervalMs: 20, timeoutMs: 20_000, onPart: (n: number) => parts.push(n) };
  const job = await enqueueUpload(c, "digest", data, { ...opts, enqueue: { tags: { via: "upload" } } });
  assert.deepEqual(parts, [1, 2]);
  assert.ok(puts.length === 2 && puts.every((u) => u.startsWith("mem://uploads/")), `the parts went to ${puts.length} links`);
  assert.deepEqual(job.tags, { via: "upload" });
  const done = await waitForJob(c, job.id, { intervalMs: 20, timeoutMs: 20_000 });
  assert.deepEqual(done.result, { bytes: text.length, sha256: createHash("sha256").update(text).digest("hex") });
  assert.ok((done.payload_bytes ?? 0) >= data.byteLength, `payload_bytes ${done.payload_bytes}`);

  // Not the kind's payload: the worker refuses it, and no job is made.
  const before = must(await c.GET("/v1/jobs", { params: { query: { kind: "digest" } } })).jobs.length;
  await assert.rejects(enqueueUpload(c, "digest", new TextEncoder().encode('{"text":"a","more":1}'), opts), (e: unknown) => e instanceof UploadError && e.code === "upload_invalid");
  assert.equal(must(await c.GET("/v1/jobs", { params: { query: { kind: "digest" } } })).jobs.length, before);
  // A part's PUT refused names the part, never its link.
  const refused = (async () => new Response("no", { status: 403 })) as typeof fetch;
  await assert.rejects(enqueueUpload(c, "digest", data, { ...opts, partFetch: refused }), (e: unknown) => e instanceof Error && /part 1 of 2: 403$/.test(e.message) && !e.message.includes("mem://"));
  const broken = (async (u: RequestInfo | URL) => { throw new TypeError(`fetch failed: ${String(u)}`); }) as typeof fetch;
  await assert.rejects(enqueueUpload(c, "digest", data, { ...opts, partFetch: broken }), (e: unknown) => e instanceof Error && /part 1 of 2: the request failed \(TypeError\)$/.test(e.message) && !e.message.includes("mem://"));
  // The client's own credentials never go with a part: the server refuses them.
  await assert.rejects(enqueueUpload(c, "digest", data, { ...opts, partFetch: ((u: RequestInfo | URL, init?: RequestInit) => partFetch(u, { ...init, headers: { "X-Local-Caller": "ts" } })) as typeof fetch }), /part 1 of 2: 400/);
});

test("sigv4Fetch signs for execute-api in the region, and only over https or to this machine", async () => {
  let sent: { url: string; headers: Headers; body?: string } | undefined;
  const inner = (async (url: RequestInfo | URL, init?: RequestInit) => {
    sent = { url: String(url), headers: new Headers(init?.headers), body: init?.body as string | undefined };
    return new Response("{}", { status: 200 });
  }) as typeof fetch;
  const f = sigv4Fetch({ region: "eu-west-1", credentials: { accessKeyId: "AKIDEXAMPLE", secretAccessKey: "wJalrXUtnFEMI", sessionToken: "tok" } }, inner);
  await f("https://abc123.execute-api.eu-west-1.amazonaws.com/v1/jobs?limit=5", { method: "POST", body: '{"kind":"greet"}', headers: { "content-type": "application/json" } });
  assert.ok(sent);
  assert.match(
    sent.headers.get("authorization") ?? "",
    /^AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE\/\d{8}\/eu-west-1\/execute-api\/aws4_request, SignedHeaders=[a-z0-9;-]*host[a-z0-9;-]*, Signature=[0-9a-f]{64}$/,
  );
  assert.equal(sent.headers.get("x-amz-security-token"), "tok");
  assert.ok(sent.headers.get("x-amz-date"));
  assert.equal(sent.body, '{"kind":"greet"}');
  assert.equal(sent.url, "https://abc123.execute-api.eu-west-1.amazonaws.com/v1/jobs?limit=5");
  await assert.rejects(f("http://jobs.example.com/v1/jobs"), /signs only over https/);
  await f("http://127.0.0.1:8080/v1/jobs");
  const c = createJobsClient({ baseUrl: "https://abc123.execute-api.eu-west-1.amazonaws.com/", sigv4: { region: "eu-west-1", credentials: async () => ({ accessKeyId: "AKID2", secretAccessKey: "s" }) }, caller: "ignored", fetch: inner });
  await c.GET("/v1/jobs/{id}", { params: { path: { id: "j1" } } });
  assert.equal(sent?.url, "https://abc123.execute-api.eu-west-1.amazonaws.com/v1/jobs/j1");
  assert.match(sent?.headers.get("authorization") ?? "", /Credential=AKID2\//);
  assert.equal(sent?.headers.get("x-local-caller"), null);
});
