// Type-checked (never run) against kinds.ts, which lambdajobs-kinds
// writes from the API of internal/devtools/apitest: each kind's payload is
// its own type, and a wrong one does not compile (each @ts-expect-error
// fails the check if its line compiles).
import { createJobsClient } from "../../src/index.js";
import { enqueue, resultOf, type GreetPayload, type Kinds } from "./kinds.js";

export async function use(): Promise<void> {
  const c = createJobsClient({ baseUrl: "http://127.0.0.1:8080" });
  const p: GreetPayload = { name: "ana", token: "t" };
  const job = await enqueue(c, "greet", p, "key-1");
  const greeting: string | undefined = resultOf(job, "greet");
  await enqueue(c, "shout.word", "hey");
  await enqueue(c, "approve", {});
  const code: Kinds["greet"]["failureCode"] = "no_name";
  // @ts-expect-error: a field greet's payload does not have
  await enqueue(c, "greet", { name: "ana", nmae: "typo" });
  // @ts-expect-error: shout.word's payload is a string
  await enqueue(c, "shout.word", 42);
  // @ts-expect-error: an internal kind is not among the kinds
  await enqueue(c, "internal.cleanup", {});
  // @ts-expect-error: greet's result is a string
  const n: number | undefined = resultOf(job, "greet");
  // @ts-expect-error: greet declares no such code
  const other: Kinds["greet"]["failureCode"] = "sold_out";
  void [greeting, code, n, other];
}
