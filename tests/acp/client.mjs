// A driver around the official ACP TypeScript SDK (@agentclientprotocol/sdk),
// for tests/system/test_acp.py: the SDK plays the editor. It starts the
// agent (the command comes in the first command) and then takes one JSON
// command per line on stdin, running them concurrently; each answer is one
// JSON line on stdout carrying the command's tag:
//
//   {"tag":T,"op":"connect","command":"gbrctl","args":["acp"],"env":{...}}
//   {"tag":T,"op":"request","method":"session/new","params":{...}}
//   {"tag":T,"op":"notify","method":"session/cancel","params":{...}}
//   {"tag":T,"op":"answer","rid":N,"outcome":{...}}   answer a permission
//   {"tag":T,"op":"close"}
//
// Answers: {"tag":T,"ok":true,"result":...} or {"tag":T,"ok":false,
// "error":{"code","message","data"}}. What the agent sends on its own:
// {"update":params} for each session/update, {"permission":params,"rid":N}
// for each session/request_permission (held until an "answer"), and
// {"aborted":N} when the agent cancels that request ($/cancel_request).
import { spawn } from "node:child_process";
import readline from "node:readline";
import { Readable, Writable } from "node:stream";

import * as acp from "@agentclientprotocol/sdk";

let conn = null;
let child = null;
let nextRid = 1;
const held = new Map();	// rid -> resolve

function out(obj) {
	process.stdout.write(JSON.stringify(obj) + "\n");
}

function fail(tag, e) {
	out({ tag, ok: false, error: { code: e?.code ?? null,
	    message: String(e?.message ?? e), data: e?.data ?? null } });
}

function connect(cmd) {
	child = spawn(cmd.command, cmd.args ?? [], { env: cmd.env ?? {},
	    stdio: ["pipe", "pipe", "inherit"] });
	const stream = acp.ndJsonStream(Writable.toWeb(child.stdin),
	    Readable.toWeb(child.stdout));
	const app = acp.client({ name: "gbr-tests" })
	    .onNotification(acp.methods.client.session.update, (ctx) => {
		out({ update: ctx.params });
	    })
	    .onRequest(acp.methods.client.session.requestPermission, (ctx) => {
		const rid = nextRid++;
		return new Promise((resolve) => {
			held.set(rid, resolve);
			ctx.signal.addEventListener("abort", () => {
				out({ aborted: rid });
				held.delete(rid);
				resolve({ outcome: { outcome: "cancelled" } });
			});
			out({ permission: ctx.params, rid });
		});
	    });
	conn = app.connect(stream);
}

async function run(cmd) {
	const tag = cmd.tag;
	switch (cmd.op) {
	case "connect":
		connect(cmd);
		out({ tag, ok: true, result: { pid: child.pid } });
		return;
	case "request":
		out({ tag, ok: true, result: await conn.agent.request(cmd.method,
		    cmd.params ?? {}) });
		return;
	case "notify":
		await conn.agent.notify(cmd.method, cmd.params ?? {});
		out({ tag, ok: true, result: null });
		return;
	case "answer": {
		const resolve = held.get(cmd.rid);
		held.delete(cmd.rid);
		if (resolve)
			resolve({ outcome: cmd.outcome });
		out({ tag, ok: true, result: resolve !== undefined });
		return;
	}
	case "close":
		conn.close();
		child.stdin.end();
		await new Promise((r) => child.exitCode !== null ? r() :
		    child.on("exit", r));
		out({ tag, ok: true, result: { exitCode: child.exitCode } });
		process.exit(0);
	}
}

const rl = readline.createInterface({ input: process.stdin });
rl.on("line", (line) => {
	const cmd = JSON.parse(line);
	run(cmd).catch((e) => fail(cmd.tag, e));
});
rl.on("close", () => {
	if (child)
		child.kill();
	process.exit(0);
});
