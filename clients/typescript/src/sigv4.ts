// SigV4 for a deployed API (IAM auth on API Gateway): a fetch that signs
// each request with the AWS SDK for JavaScript's signer, as the service
// execute-api in the API's region.
import { Sha256 } from "@aws-crypto/sha256-js";
import { HttpRequest } from "@smithy/protocol-http";
import { SignatureV4 } from "@smithy/signature-v4";

/** AWS credentials, as the AWS SDK's providers give them. */
export interface Credentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
  expiration?: Date;
}

/** How to sign: the API's region, and the credentials (or a provider of them, such as fromNodeProviderChain() of @aws-sdk/credential-providers). */
export interface SigV4Options {
  region: string;
  credentials: Credentials | (() => Promise<Credentials>);
}

/**
 * sigv4Fetch returns a fetch that signs every request before inner sends
 * it. It refuses to sign a request over plain http to anything but this
 * machine: a signed request carries the caller's access key id.
 */
export function sigv4Fetch(opts: SigV4Options, inner: typeof fetch = fetch): typeof fetch {
  const signer = new SignatureV4({ service: "execute-api", region: opts.region, credentials: opts.credentials, sha256: Sha256 });
  return async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const req = new Request(input, init);
    const url = new URL(req.url);
    if (url.protocol !== "https:" && !isLoopback(url.hostname)) {
      throw new Error(`lambdajobs: SigV4 signs only over https (or to this machine): ${url.host} is plain ${url.protocol}`);
    }
    const body = req.body === null ? undefined : await req.text();
    const headers: Record<string, string> = {};
    req.headers.forEach((v, k) => {
      headers[k] = v;
    });
    headers["host"] = url.host;
    const query: Record<string, string | string[]> = {};
    url.searchParams.forEach((v, k) => {
      const had = query[k];
      query[k] = had === undefined ? v : ([] as string[]).concat(had, v);
    });
    const signed = await signer.sign(
      new HttpRequest({
        method: req.method,
        protocol: url.protocol,
        hostname: url.hostname,
        port: url.port === "" ? undefined : Number(url.port),
        path: url.pathname,
        query,
        headers,
        body,
      }),
    );
    const out = new Headers();
    for (const [k, v] of Object.entries(signed.headers)) {
      if (k.toLowerCase() !== "host") out.set(k, String(v)); // fetch sends the URL's host, which was signed
    }
    return inner(url, { method: req.method, headers: out, body, signal: req.signal });
  };
}

function isLoopback(host: string): boolean {
  return host === "localhost" || host === "[::1]" || /^127\.\d+\.\d+\.\d+$/.test(host);
}
