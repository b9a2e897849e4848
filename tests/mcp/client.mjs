// A driver around the official MCP TypeScript SDK, for
// tests/system/test_mcp.py. It starts an MCP server over stdio (the
// command and environment come in the first command) and then takes one
// JSON command per line on stdin, running them concurrently; each answer
// is one JSON line on stdout carrying the command's tag:
//
//   {"tag":T,"op":"connect","command":"gbrctl","args":["mcp",...],"env":{...}}
//   {"tag":T,"op":"list"}
//   {"tag":T,"op":"call","name":"read_file","arguments":{...},"progress":true,"timeout":ms}
//   {"tag":T,"op":"cancel","target":TAG}      abort a call (notifications/cancelled)
//   {"tag":T,"op":"ping"}
//   {"tag":T,"op":"close"}                    close the transport, then exit
//
// Answers: {"tag":T,"ok":true,"result":...} or {"tag":T,"ok":false,
// "error":{"code","message","data"}}; progress notifications come as
// {"tag":T,"progress":{...}} while a call with "progress":true waits.
import readline from "node:readline";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

let client = null;
let transport = null;
const calls = new Map();	// tag -> AbortController

function out(obj) {
	process.stdout.write(JSON.stringify(obj) + "\n");
}

function fail(tag, e) {
	out({ tag, ok: false, error: { code: e?.code ?? null,
	    message: String(e?.message ?? e), data: e?.data ?? null } });
}

async function run(cmd) {
	const tag = cmd.tag;
	switch (cmd.op) {
	case "connect": {
		transport = new StdioClientTransport({ command: cmd.command,
		    args: cmd.args ?? [], env: cmd.env ?? {}, stderr: "inherit" });
		client = new Client({ name: "gbr-tests", version: "1.0.0" },
		    { capabilities: {} });
		await client.connect(transport);
		out({ tag, ok: true, result: {
		    serverVersion: client.getServerVersion(),
		    capabilities: client.getServerCapabilities(),
		    instructions: client.getInstructions(),
		    pid: transport.pid ?? null } });
		return;
	}
	case "list":
		out({ tag, ok: true, result: await client.listTools() });
		return;
	case "ping":
		out({ tag, ok: true, result: await client.ping() });
		return;
	case "call": {
		const ac = new AbortController();
		calls.set(tag, ac);
		const opts = { signal: ac.signal, timeout: cmd.timeout ?? 60000 };
		if (cmd.progress) {
			opts.onprogress = (p) => out({ tag, progress: p });
			opts.resetTimeoutOnProgress = true;
		}
		try {
			const r = await client.callTool({ name: cmd.name,
			    arguments: cmd.arguments ?? {} }, undefined, opts);
			out({ tag, ok: true, result: r });
		} finally {
			calls.delete(tag);
		}
		return;
	}
	case "cancel": {
		const ac = calls.get(cmd.target);
		if (ac === undefined)
			throw new Error("no call " + cmd.target + " in flight");
		ac.abort("cancelled by the test");
		out({ tag, ok: true, result: {} });
		return;
	}
	case "close":
		await client.close();
		out({ tag, ok: true, result: {} });
		process.exit(0);
	default:
		throw new Error("unknown op " + cmd.op);
	}
}

const rl = readline.createInterface({ input: process.stdin });
rl.on("line", (line) => {
	if (line.trim() === "")
		return;
	let cmd;
	try {
		cmd = JSON.parse(line);
	} catch (e) {
		fail(null, e);
		return;
	}
	run(cmd).catch((e) => fail(cmd.tag, e));
});
rl.on("close", async () => {
	if (client !== null)
		await client.close().catch(() => {});
	process.exit(0);
});
