// The official TypeScript MCP client (the one Claude Code and Claude Desktop embed) surveys a
// server over stdio and prints what it saw as JSON: the gateway's tests run it against a server
// directly and through toolscope-mcp, and compare. Usage: node survey.mjs COMMAND [ARGS...]
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [command, ...args] = process.argv.slice(2);
const transport = new StdioClientTransport({ command, args, stderr: "ignore" });
const client = new Client({ name: "survey", version: "1.0.0" });
await client.connect(transport);

const resources = (await client.listResources()).resources;
const progress = [];
const done = await client.callTool(
  { name: "trigger-long-running-operation", arguments: { duration: 1, steps: 3 } },
  undefined,
  { onprogress: (p) => progress.push(p.progress) },
);
const seen = {
  instructions: client.getInstructions() ?? "",
  capabilities: client.getServerCapabilities(),
  tools: (await client.listTools()).tools.map((tool) => tool.name).sort(),
  resources: resources.map((resource) => resource.uri),
  templates: (await client.listResourceTemplates()).resourceTemplates.map((t) => t.uriTemplate),
  prompts: (await client.listPrompts()).prompts.map((prompt) => prompt.name),
  read: await client.readResource({ uri: resources[0].uri }),
  prompt: await client.getPrompt({ name: "args-prompt", arguments: { city: "Lyon", state: "Rhone" } }),
  completion: (await client.complete({
    ref: { type: "ref/prompt", name: "completable-prompt" },
    argument: { name: "department", value: "S" },
  })).completion.values,
  progress,
  done: done.content,
};
console.log(JSON.stringify(seen));
await client.close();
