// Drives `kotoba mcp` with the official MCP TypeScript SDK as the client.
// usage: node driver.mjs KOTOBA SOCKET CWD SCENARIO_JSON
// SCENARIO_JSON: {"answer": "once"|"always"|"deny"|"decline"|null (no
// elicitation capability), "escalation": "rerun"|"leave", "steps": [{"list": true} | {"code": "...",
// "cancel_on_progress": true}]}.  Prints one JSON line: what each step gave
// and the messages of the elicitations the client was sent.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const [kotoba, socket, cwd, scenarioText] = process.argv.slice(2);
const scenario = JSON.parse(scenarioText);
const elicits = scenario.answer !== null;
const client = new Client({ name: "kotoba-test", version: "1" },
  { capabilities: elicits ? { elicitation: {} } : {} });
const elicitations = [];

if (elicits) {
  client.setRequestHandler(ElicitRequestSchema, async (req) => {
    elicitations.push({ message: req.params.message, schema: req.params.requestedSchema });
    // An escalation card's options are rerun and leave.
    const escalation = req.params.requestedSchema.properties.answer.enum.includes("rerun");
    const answer = escalation ? scenario.escalation ?? "leave" : scenario.answer;
    if (answer === "decline") return { action: "decline" };
    return { action: "accept", content: { answer } };
  });
}

const transport = new StdioClientTransport({
  command: kotoba, args: ["mcp", "--socket", socket, "--cwd", cwd], stderr: "inherit",
});
await client.connect(transport);
const out = { server: client.getServerVersion(), steps: [], elicitations };
for (const step of scenario.steps) {
  if (step.list) {
    out.steps.push(await client.listTools());
    continue;
  }
  const ac = new AbortController();
  try {
    out.steps.push(await client.callTool(
      { name: "execute_code", arguments: { code: step.code } }, undefined,
      {
        signal: ac.signal, timeout: 120000,
        onprogress: step.cancel_on_progress ? () => ac.abort("cancelled by the test") : undefined,
      }));
  } catch (e) {
    out.steps.push({ thrown: String(e) });
  }
}
await client.close();
console.log(JSON.stringify(out));
