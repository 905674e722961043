// Evaluates IAM requests with @cloud-copilot/iam-simulate (pinned in
// package-lock.json): reads a JSON array of simulations on stdin (the
// library's Simulation objects), writes a JSON array of results on stdout,
// one per simulation, in order: {"result": "Allowed" | "ExplicitlyDenied" |
// "ImplicitlyDenied" | "Error", "errors": ...}. Used by infra's policy
// evaluation tests (jobsinfra/iam_test.go); it reaches no network.
import { runSimulation } from '@cloud-copilot/iam-simulate'

const chunks = []
for await (const chunk of process.stdin) chunks.push(chunk)
const simulations = JSON.parse(Buffer.concat(chunks).toString('utf8'))
const results = []
for (const simulation of simulations) {
  const r = await runSimulation(simulation, {})
  if (r.resultType === 'error') {
    results.push({ result: 'Error', errors: r.errors })
  } else {
    results.push({ result: r.overallResult })
  }
}
process.stdout.write(JSON.stringify(results))
