// A typed client of the lambdajobs HTTP API. The paths, bodies and
// answers are generated from docs/reference/openapi.yaml (openapi-typescript) and
// called with openapi-fetch; this file adds only what a generator cannot:
// the caller's identity (SigV4, or the local stack's caller), problem+json
// answers as a typed error, waiting for a job to end (with waits for
// its changes, GET /v1/jobs/{id}/wait), and a payload uploaded in parts
// (POST /v1/uploads).
import createClient, { type Client } from "openapi-fetch";
import type { components, paths } from "./generated/api.js";
import { sigv4Fetch, type SigV4Options } from "./sigv4.js";

export type { components, paths } from "./generated/api.js";
export { sigv4Fetch, type Credentials, type SigV4Options } from "./sigv4.js";

/** A job as the API shows it. */
export type Job = components["schemas"]["Job"];
/** A problem+json answer (RFC 9457) with its code. */
export type Problem = components["schemas"]["Problem"];
/** The client: client.GET("/v1/jobs/{id}", { params: { path: { id } } }), client.POST("/v1/jobs", { body }), ... */
export type JobsClient = Client<paths>;

export interface ClientOptions {
  /** The API's base URL (the stack output ApiUrl; http://127.0.0.1:8080 for make run). */
  baseUrl: string;
  /** Sign every request with SigV4 (a deployed API with IAM auth). */
  sigv4?: SigV4Options;
  /** The local stack's caller (X-Local-Caller); never sent with sigv4. */
  caller?: string;
  /** A bearer token (a deployed API with JWT auth). */
  token?: string;
  /** The fetch to send with (globalThis.fetch by default). */
  fetch?: typeof fetch;
}

/** createJobsClient returns a client of the API at opts.baseUrl. */
export function createJobsClient(opts: ClientOptions): JobsClient {
  const base = opts.fetch ?? globalThis.fetch;
  const send = opts.sigv4 ? sigv4Fetch(opts.sigv4, base) : base;
  const headers: Record<string, string> = {};
  if (opts.caller && !opts.sigv4) headers["X-Local-Caller"] = opts.caller;
  if (opts.token) headers["Authorization"] = `Bearer ${opts.token}`;
  return createClient<paths>({ baseUrl: opts.baseUrl.replace(/\/+$/, ""), headers, fetch: (req: Request) => send(req) });
}

/** ProblemError is an answer of the API that is a problem: its status, code, title and detail. */
export class ProblemError extends Error {
  readonly status: number;
  readonly code: string;
  readonly title: string;
  readonly detail?: string;
  readonly problem: Partial<Problem>;
  constructor(status: number, problem: Partial<Problem>) {
    super(`${status} ${problem.title ?? ""} (${problem.code ?? "no code"})${problem.detail ? ": " + problem.detail : ""}`);
    this.name = "ProblemError";
    this.status = status;
    this.code = problem.code ?? "";
    this.title = problem.title ?? "";
    this.detail = problem.detail;
    this.problem = problem;
  }
}

/** must returns an answer's data, or throws its problem as a ProblemError. */
export function must<T>(answer: { data?: T; error?: unknown; response: Response }): T {
  if (answer.error !== undefined || !answer.response.ok) {
    const p = typeof answer.error === "object" && answer.error !== null ? (answer.error as Partial<Problem>) : {};
    throw new ProblemError(answer.response.status, p);
  }
  return answer.data as T;
}

/** isFinal reports whether a job has ended: succeeded, failed or cancelled. */
export function isFinal(job: Pick<Job, "status">): boolean {
  return job.status === "succeeded" || job.status === "failed" || job.status === "cancelled";
}

export interface WaitOptions {
  /** How often to read the job when a wait is refused (429 too_many_waits; 500 when every wait instance is busy), and in the last second before timeoutMs (500 ms by default). */
  intervalMs?: number;
  /** How long to wait at most (no bound by default): then a TimeoutError. */
  timeoutMs?: number;
  /** Stops the wait. */
  signal?: AbortSignal;
  /** Called with each read of the job that changed (its status or partial result). */
  onChange?: (job: Job) => void;
}

/** maxWaitSeconds is the longest wait GET /v1/jobs/{id}/wait accepts. */
export const maxWaitSeconds = 20;

/**
 * waitForJob follows the job until it has ended and returns it as it ended:
 * after a first read, each answer is a wait for the job's next change (GET
 * /v1/jobs/{id}/wait from the ETag last seen), answered within about a
 * quarter of a second of it. A refused wait falls back to a read after
 * intervalMs.
 */
export async function waitForJob(client: JobsClient, id: string, opts: WaitOptions = {}): Promise<Job> {
  const interval = opts.intervalMs ?? 500;
  const deadline = opts.timeoutMs === undefined ? Infinity : Date.now() + opts.timeoutMs;
  const read = async (): Promise<[Job, string]> => {
    const answer = await client.GET("/v1/jobs/{id}", { params: { path: { id } }, signal: opts.signal });
    return [must(answer), answer.response.headers.get("ETag") ?? ""];
  };
  let last = "";
  let [job, etag] = await read();
  for (;;) {
    const seen = JSON.stringify([job.status, job.result, job.waiting_on]);
    if (seen !== last) {
      last = seen;
      opts.onChange?.(job);
    }
    if (isFinal(job)) return job;
    opts.signal?.throwIfAborted();
    const seconds = Math.min(maxWaitSeconds, Math.floor((deadline - Date.now()) / 1000));
    if (etag !== "" && seconds >= 1) {
      const answer = await client.GET("/v1/jobs/{id}/wait", {
        params: { path: { id }, query: { timeout: seconds }, header: { "If-None-Match": etag } },
        signal: opts.signal,
      });
      if (answer.response.ok) {
        job = must(answer);
        etag = answer.response.headers.get("ETag") ?? "";
        continue;
      }
      if (answer.response.status !== 429 && answer.response.status < 500) must(answer);
    }
    if (Date.now() + interval > deadline) {
      throw new DOMException(`lambdajobs: job ${id} has not ended within ${opts.timeoutMs} ms (${job.status})`, "TimeoutError");
    }
    await new Promise((resolve) => setTimeout(resolve, interval));
    [job, etag] = await read();
  }
}

/** An enqueue's body (POST /v1/jobs). */
export type EnqueueRequest = components["schemas"]["EnqueueRequest"];
/** An upload as GET /v1/uploads/{id} shows it. */
export type UploadView = components["schemas"]["UploadView"];

export interface UploadOptions {
  /** What else the job's enqueue sends (tags, delay_seconds, ...): not kind, payload or upload. */
  enqueue?: Omit<EnqueueRequest, "kind" | "payload" | "upload">;
  /** The fetch that PUTs the parts to their presigned links (globalThis.fetch by default). Never the client's own: a link is its credential, and signing it again would break it. */
  partFetch?: typeof fetch;
  /** How often to read the upload while a worker validates it (500 ms by default). */
  intervalMs?: number;
  /** How long to wait for the validation at most, once the parts are up (no bound by default): then a TimeoutError. */
  timeoutMs?: number;
  /** Stops the upload. */
  signal?: AbortSignal;
  /** Called after each part is uploaded. */
  onPart?: (number: number, of: number) => void;
}

/** UploadError is an upload a worker refused: its code (upload_too_large, upload_invalid, upload_incomplete, upload_expired, cancelled). */
export class UploadError extends Error {
  readonly code: string;
  readonly upload: UploadView;
  constructor(upload: UploadView) {
    super(`lambdajobs: upload ${upload.id} failed: ${upload.error ?? "failed"}`);
    this.name = "UploadError";
    this.code = upload.error ?? "";
    this.upload = upload;
  }
}

/**
 * enqueueUpload makes a job of kind whose payload (its JSON, as bytes) is
 * past what POST /v1/jobs takes: it starts an upload, PUTs each part to its
 * presigned link, completes it, reads it until a worker has validated it,
 * and enqueues the job with it, which it returns. Enqueueing the same
 * upload again answers the same job. A refused upload throws an
 * UploadError, an answer of the API that is a problem a ProblemError, and a
 * part's PUT that fails an Error that names the part (never its link).
 */
export async function enqueueUpload(client: JobsClient, kind: string, data: Uint8Array | Blob, opts: UploadOptions = {}): Promise<Job> {
  const interval = opts.intervalMs ?? 500;
  const size = data instanceof Blob ? data.size : data.byteLength;
  const up = must(await client.POST("/v1/uploads", { body: { kind, bytes: size }, signal: opts.signal }));
  const put = opts.partFetch ?? globalThis.fetch;
  const etags: string[] = [];
  for (const [i, part] of up.parts.entries()) {
    const from = i * up.part_bytes;
    const to = i === up.parts.length - 1 ? size : Math.min(from + up.part_bytes, size);
    let answer: Response;
    try {
      answer = await put(part.url, { method: "PUT", body: data.slice(from, to), signal: opts.signal });
    } catch (e) {
      if (opts.signal?.aborted) throw e;
      // Not the error itself: its message may hold the link, which is a credential for the part.
      throw new Error(`lambdajobs: PUT part ${part.number} of ${up.parts.length}: the request failed (${e instanceof Error ? e.name : "error"})`);
    }
    const etag = answer.headers.get("ETag");
    await answer.body?.cancel();
    if (!answer.ok || etag === null) {
      throw new Error(`lambdajobs: PUT part ${part.number} of ${up.parts.length}: ${answer.status}${etag === null && answer.ok ? " without an ETag (a browser needs the bucket's CORS rule: jobsinfra.Config.CORS)" : ""}`);
    }
    etags.push(etag);
    opts.onPart?.(part.number, up.parts.length);
  }
  const path = { params: { path: { id: up.id } }, signal: opts.signal };
  const deadline = opts.timeoutMs === undefined ? Infinity : Date.now() + opts.timeoutMs;
  let view = must(await client.POST("/v1/uploads/{id}/complete", { ...path, body: { etags } }));
  while (view.status !== "ready") {
    if (view.status === "failed") throw new UploadError(view);
    if (Date.now() + interval > deadline) {
      throw new DOMException(`lambdajobs: upload ${up.id} was not validated within ${opts.timeoutMs} ms (${view.status})`, "TimeoutError");
    }
    await new Promise((resolve) => setTimeout(resolve, interval));
    opts.signal?.throwIfAborted();
    view = must(await client.GET("/v1/uploads/{id}", path));
  }
  return must(await client.POST("/v1/jobs", { body: { ...opts.enqueue, kind, upload: up.id } as EnqueueRequest, signal: opts.signal }));
}
