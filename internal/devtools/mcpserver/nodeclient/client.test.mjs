// An MCP client no one here wrote, @modelcontextprotocol/sdk's (pinned in
// package.json), against ljob mcp over stdio: the server is the binary
// in LJOB_MCP, speaking to the API at LAMBDAJOBS_API. Run by
// internal/devtools/mcpserver (TestAnMCPClientNoOneHereWrote), which
// builds the binary and starts the API.
import assert from "node:assert/strict";
import { test } from "node:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const server = process.env.LJOB_MCP ?? "";
const api = process.env.LAMBDAJOBS_API ?? "";
const secret = process.env.SECRET ?? "";
assert.ok(server !== "" && api !== "" && secret !== "", "LJOB_MCP, LAMBDAJOBS_API and SECRET are set by the Go test");

const text = (res) => res.content.filter((c) => c.type === "text").map((c) => c.text).join("");

test("the tools, a job run to its end, a bad payload, and no secret anywhere", async () => {
  const client = new Client({ name: "nodeclient", version: "0.0.0" });
  await client.connect(new StdioClientTransport({ command: server, args: ["-api", api, "-caller", "node"], stderr: "pipe" }));
  const outputs = [];
  try {
    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name).sort();
    for (const want of ["enqueue_approve", "enqueue_greet", "enqueue_shout.word", "get_job", "wait_job"]) {
      assert.ok(names.includes(want), `no tool ${want} in ${names}`);
    }
    assert.ok(!names.some((n) => n.includes("cleanup")), `an internal kind has a tool: ${names}`);
    const greet = tools.find((t) => t.name === "enqueue_greet");
    assert.ok(JSON.stringify(greet.inputSchema).includes('"name"'), "enqueue_greet's input schema is not the payload's");

    const queued = await client.callTool({ name: "enqueue_greet", arguments: { name: "ana", token: secret } });
    outputs.push(text(queued));
    assert.ok(!queued.isError, text(queued));
    const id = JSON.parse(text(queued)).id;
    let job = { status: "queued" };
    for (let i = 0; i < 20 && job.status !== "succeeded"; i++) {
      const waited = await client.callTool({ name: "wait_job", arguments: { id, seconds: 5 } });
      outputs.push(text(waited));
      assert.ok(!waited.isError, text(waited));
      job = JSON.parse(text(waited));
    }
    assert.equal(job.status, "succeeded");
    assert.equal(job.result, "hello ana");

    const bad = await client.callTool({ name: "enqueue_greet", arguments: { name: "x", nmae: "typo" } });
    outputs.push(text(bad));
    assert.ok(bad.isError && text(bad).includes("invalid_payload"), `a bad payload: ${text(bad)}`);

    for (const out of outputs) assert.ok(!out.includes(secret), `an output carries the secret: ${out}`);
  } finally {
    await client.close();
  }
});
