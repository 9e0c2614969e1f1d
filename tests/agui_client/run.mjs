// Drives Lomo's POST /v1/ag-ui with the official AG-UI client (`HttpAgent`) and prints
// what the client made of it as one JSON object: the events it saw, its messages, its
// state and its pending interrupts, per run.
//   node run.mjs URL TOKEN TEXT             one run on the main thread
//   node run.mjs URL TOKEN TEXT APP_TOKEN   a run as TOKEN, then its interrupts answered
//                                            ("confirm") by the person's APP_TOKEN
import { HttpAgent } from "@ag-ui/client";

const [url, token, text, appToken] = process.argv.slice(2);
const agent = new HttpAgent({
  url,
  headers: { Authorization: `Bearer ${token}` },
  threadId: "main",
  initialMessages: [{ id: "person-1", role: "user", content: text }],
});

async function run(params) {
  const events = [];
  let failed = null;
  try {
    await agent.runAgent(params, { onEvent({ event }) { events.push(event); } });
  } catch (e) {
    failed = String(e && e.message ? e.message : e);
  }
  return {
    events,
    failed,
    messages: structuredClone(agent.messages),
    state: structuredClone(agent.state),
    pendingInterrupts: structuredClone(agent.pendingInterrupts),
  };
}

const runs = [await run({})];
if (appToken && agent.pendingInterrupts.length > 0) {
  // The interrupted run's task carries on; only the person's app may confirm.
  agent.threadId = runs[0].state.task_id;
  agent.headers = { Authorization: `Bearer ${appToken}` };
  const resume = agent.pendingInterrupts.map((i) => ({ interruptId: i.id, status: "resolved", payload: { action: "confirm" } }));
  runs.push(await run({ resume }));
}
process.stdout.write(JSON.stringify(runs));
