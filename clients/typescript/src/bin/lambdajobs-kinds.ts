#!/usr/bin/env node
// lambdajobs-kinds writes the TypeScript types of a deployment's kinds,
// read from its API (GET /v1/kinds) or from that answer saved in a file:
//
//   npx lambdajobs-kinds http://127.0.0.1:8080 > src/kinds.ts      # make run's API
//   npx lambdajobs-kinds kinds.json --client ./client.js > kinds.ts
//
// --client names the module the types import the client from
// (@lambdajobs/client by default). A deployed API with IAM auth: save
// `ljob -json kinds` (which signs) to a file and give the file.
import { readFile } from "node:fs/promises";
import { kindsToTypeScript, type KindSchema } from "../kinds.js";

async function main(args: string[]): Promise<number> {
  let client = "@lambdajobs/client";
  const rest: string[] = [];
  for (let i = 0; i < args.length; i++) {
    if (args[i] === "--client" && i + 1 < args.length) client = args[++i]!;
    else rest.push(args[i]!);
  }
  if (rest.length !== 1) {
    process.stderr.write("usage: lambdajobs-kinds API_URL|KINDS.json [--client MODULE] > kinds.ts\n");
    return 2;
  }
  const source = rest[0]!;
  let body: string;
  if (/^https?:\/\//.test(source)) {
    const res = await fetch(source.replace(/\/+$/, "") + "/v1/kinds");
    body = await res.text();
    if (!res.ok) throw new Error(`GET ${source}/v1/kinds: ${res.status} ${body.slice(0, 200)}`);
  } else {
    body = await readFile(source, "utf8");
  }
  const kinds = (JSON.parse(body) as { kinds?: KindSchema[] }).kinds;
  if (!Array.isArray(kinds)) throw new Error(`${source}: no "kinds" (the answer of GET /v1/kinds)`);
  process.stdout.write(await kindsToTypeScript(kinds, client, source));
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`lambdajobs-kinds: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
