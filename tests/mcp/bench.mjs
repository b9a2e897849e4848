// bench-mcp (run through tests/bench/bench-mcp): the same MCP client and
// the same files, side by side in one run. read_file through `gbrctl mcp`
// (and the gbrd behind it, on a private socket and state folder) against
// read_text_file through the reference server
// @modelcontextprotocol/server-filesystem. Both are driven by the official
// TypeScript SDK's Client over stdio, in alternating blocks so both see the
// same machine load; then once more by a bare JSON-lines client (no SDK
// validation) to show the servers' own share. Prints p50 and p99 of each,
// and each server's memory. Figures to read, not assertions: it exits
// non-zero only when it cannot run (a server does not start, a reply is
// wrong).
//
// usage: node tests/mcp/bench.mjs BUILD_DIR [-n calls] [-b block]
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import net from "node:net";
import { fileURLToPath } from "node:url";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const here = path.dirname(fileURLToPath(import.meta.url));
const argv = process.argv.slice(2);
let build = null, calls = 1000, block = 100;
for (let i = 0; i < argv.length; i++) {
	if (argv[i] === "-n")
		calls = parseInt(argv[++i], 10);
	else if (argv[i] === "-b")
		block = parseInt(argv[++i], 10);
	else
		build = path.resolve(argv[i]);
}
if (build === null || !(calls > 0) || !(block > 0)) {
	console.error("usage: bench.mjs BUILD_DIR [-n calls] [-b block]");
	process.exit(2);
}
const gbrctl = path.join(build, "gbrctl");
const gbrd = path.join(build, "gbrd");
const fsServer = path.join(here, "node_modules", "@modelcontextprotocol",
    "server-filesystem", "dist", "index.js");
for (const f of [gbrctl, gbrd, fsServer]) {
	if (!fs.existsSync(f)) {
		console.error(`bench-mcp: ${f} is missing (make; npm ci in tests/mcp)`);
		process.exit(1);
	}
}

// A real disk, as the user's state folder would be (not tmpfs).
const base = process.env.TMPDIR ?? "/var/tmp";
const top = fs.mkdtempSync(path.join(base, "gbr-bench-mcp-"));
const runDir = fs.mkdtempSync("/tmp/gbrbm-");	// short: a socket path
fs.chmodSync(runDir, 0o700);
const ws = path.join(top, "ws");
fs.mkdirSync(ws);
// The same 16 files for both: source-like text, 1 to 8 KiB.
const files = [];
for (let i = 0; i < 16; i++) {
	const name = `src/file${i}.c`;
	let text = "";
	for (let l = 0; text.length < 1024 * (1 + (i % 8)); l++)
		text += `/* line ${l} of file ${i} */ int f${i}_${l}(void) { return ${l}; }\n`;
	fs.mkdirSync(path.join(ws, "src"), { recursive: true });
	fs.writeFileSync(path.join(ws, name), text);
	files.push({ name, text });
}

const env = { ...process.env, GBR_SOCKET: path.join(runDir, "gbrd.sock"),
    GBR_STATE_DIR: path.join(top, "state"),
    XDG_CONFIG_HOME: path.join(top, "xdg-config") };
for (const k of ["NOTIFY_SOCKET", "LISTEN_PID", "LISTEN_FDS", "WATCHDOG_USEC",
    "GBR_CONFIG"])
	delete env[k];

let daemon = null;
function cleanup() {
	if (daemon !== null && daemon.exitCode === null)
		daemon.kill("SIGTERM");
	fs.rmSync(top, { recursive: true, force: true });
	fs.rmSync(runDir, { recursive: true, force: true });
}

function sleep(ms) {
	return new Promise((r) => setTimeout(r, ms));
}

async function startDaemon() {
	daemon = spawn(gbrd, ["-f"], { env, stdio: ["ignore", "ignore", "inherit"] });
	for (let i = 0; i < 500; i++) {
		const ok = await new Promise((resolve) => {
			const s = net.connect(env.GBR_SOCKET, () => { s.end(); resolve(true); });
			s.on("error", () => resolve(false));
		});
		if (ok)
			return;
		if (daemon.exitCode !== null)
			throw new Error("gbrd exited with " + daemon.exitCode);
		await sleep(10);
	}
	throw new Error("gbrd did not listen");
}

// Memory of a process: VmRSS, and PSS (shared pages split among users).
function mem(pid) {
	const out = { rss: NaN, pss: NaN };
	try {
		const st = fs.readFileSync(`/proc/${pid}/status`, "utf8");
		out.rss = parseInt(/VmRSS:\s+(\d+)/.exec(st)[1], 10);
		const sm = fs.readFileSync(`/proc/${pid}/smaps_rollup`, "utf8");
		out.pss = parseInt(/^Pss:\s+(\d+)/m.exec(sm)[1], 10);
	} catch (e) {
		/* gone, or no smaps_rollup on this kernel */
	}
	return out;
}

// CPU time a process has used, all its threads, in ns (schedstat).
function cpu(pid) {
	let ns = 0;
	try {
		for (const t of fs.readdirSync(`/proc/${pid}/task`))
			ns += parseInt(fs.readFileSync(`/proc/${pid}/task/${t}/schedstat`,
			    "utf8").split(" ")[0], 10);
	} catch (e) {
		return NaN;
	}
	return ns;
}

function pct(sorted, p) {
	return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))];
}

function us(ns) {
	return (Number(ns) / 1000).toFixed(0).padStart(6) + " us";
}

// One server driven by the SDK's Client.
async function sdkServer(label, command, args, tool) {
	const transport = new StdioClientTransport({ command, args, env,
	    stderr: "pipe" });
	const client = new Client({ name: "bench-mcp", version: "1" }, { capabilities: {} });
	let errText = "";
	transport.stderr?.on("data", (d) => { errText += d; });
	await client.connect(transport);
	const tools = (await client.listTools()).tools.map((t) => t.name);
	if (!tools.includes(tool))
		throw new Error(`${label} has no ${tool}: ${tools}\n${errText}`);
	let n = 0;
	return {
		label, pid: transport.pid, samples: [],
		async call(record) {
			const f = files[n++ % files.length];
			const t0 = process.hrtime.bigint();
			const r = await client.callTool({ name: tool, arguments: { path: f.name } });
			const t = process.hrtime.bigint() - t0;
			if (r.isError || r.content[0].text !== f.text)
				throw new Error(`${label}: wrong reply for ${f.name}: ` +
				    JSON.stringify(r).slice(0, 300) + "\n" + errText);
			if (record)
				this.samples.push(t);
		},
		close: () => client.close(),
	};
}

// The same server driven by hand: one JSON line out, one in, no validation.
async function rawServer(label, command, args, tool) {
	const child = spawn(command, args, { env, stdio: ["pipe", "pipe", "ignore"] });
	let buf = "", waiting = null, id = 0, n = 0;
	child.stdout.setEncoding("utf8");
	child.stdout.on("data", (d) => {
		buf += d;
		let i;
		while ((i = buf.indexOf("\n")) >= 0) {
			const line = buf.slice(0, i);
			buf = buf.slice(i + 1);
			const m = JSON.parse(line);
			if (m.id !== undefined && waiting !== null && m.id === waiting.id) {
				const w = waiting;
				waiting = null;
				w.resolve(m);
			}
		}
	});
	const rpc = (method, params) => new Promise((resolve) => {
		waiting = { id: ++id, resolve };
		child.stdin.write(JSON.stringify({ jsonrpc: "2.0", id, method, params }) + "\n");
	});
	const init = await rpc("initialize", { protocolVersion: "2025-06-18",
	    capabilities: {}, clientInfo: { name: "bench-mcp-raw", version: "1" } });
	if (!init.result)
		throw new Error(`${label}: ${JSON.stringify(init)}`);
	child.stdin.write(JSON.stringify({ jsonrpc: "2.0",
	    method: "notifications/initialized" }) + "\n");
	return {
		label, pid: child.pid, samples: [],
		async call(record) {
			const f = files[n++ % files.length];
			const t0 = process.hrtime.bigint();
			const r = await rpc("tools/call", { name: tool, arguments: { path: f.name } });
			const t = process.hrtime.bigint() - t0;
			if (!r.result || r.result.isError || r.result.content[0].text !== f.text)
				throw new Error(`${label}: wrong reply: ${JSON.stringify(r).slice(0, 300)}`);
			if (record)
				this.samples.push(t);
		},
		close: async () => { child.stdin.end(); await sleep(50); child.kill(); },
	};
}

// gbrd's own protocol on its socket, no bridge: tool.call read_file.
async function directGbrd() {
	const sock = net.connect(env.GBR_SOCKET);
	await new Promise((resolve, reject) => {
		sock.once("connect", resolve);
		sock.once("error", reject);
	});
	let buf = "", waiting = null, id = 0, n = 0;
	sock.setEncoding("utf8");
	sock.on("data", (d) => {
		buf += d;
		let i;
		while ((i = buf.indexOf("\n")) >= 0) {
			const m = JSON.parse(buf.slice(0, i));
			buf = buf.slice(i + 1);
			if (m.id !== undefined && waiting !== null && m.id === waiting.id) {
				const w = waiting;
				waiting = null;
				w.resolve(m);
			}
		}
	});
	const rpc = (method, params) => new Promise((resolve) => {
		waiting = { id: ++id, resolve };
		sock.write(JSON.stringify({ jsonrpc: "2.0", id, method, params }) + "\n");
	});
	await rpc("hello", { protocol: 1, client: "bench-mcp" });
	const s = await rpc("session.create", { workspace: ws });
	const sid = s.result.id;
	return {
		label: "gbrd alone (tool.call)", samples: [],
		async call(record) {
			const f = files[n++ % files.length];
			const t0 = process.hrtime.bigint();
			const r = await rpc("tool.call", { session: sid, tool: "read_file",
			    args: { path: f.name } });
			const t = process.hrtime.bigint() - t0;
			if (!r.result || r.result.result.content !== f.text)
				throw new Error(`gbrd: wrong reply: ${JSON.stringify(r).slice(0, 300)}`);
			if (record)
				this.samples.push(t);
		},
		close: async () => sock.end(),
	};
}

// Alternating blocks, after a warm-up, so both see the same load.
async function race(a, b) {
	for (let i = 0; i < 200; i++) {
		await a.call(false);
		await b.call(false);
	}
	for (let done = 0; done < calls; done += block) {
		const k = Math.min(block, calls - done);
		for (let i = 0; i < k; i++)
			await a.call(true);
		for (let i = 0; i < k; i++)
			await b.call(true);
	}
}

function stats(s) {
	const sorted = [...s.samples].sort((x, y) => (x < y ? -1 : x > y ? 1 : 0));
	return { p50: pct(sorted, 0.5), p99: pct(sorted, 0.99) };
}

function ratio(x, y) {
	return (Number(y) / Number(x)).toFixed(1) + "x";
}

// The floor: a stand-in server that answers from memory, doing no work a
// real server could skip (a few lines of Node). No server can beat it with
// the same client.
const floorScript = `
const fs = require("fs"), path = require("path"), rl = require("readline");
const ws = process.argv[1];
const out = (m) => process.stdout.write(JSON.stringify(m) + "\\n");
rl.createInterface({ input: process.stdin }).on("line", (line) => {
	const m = JSON.parse(line);
	if (m.id === undefined)
		return;
	if (m.method === "initialize")
		out({ jsonrpc: "2.0", id: m.id, result: { protocolVersion:
		    m.params.protocolVersion, capabilities: { tools: {} },
		    serverInfo: { name: "floor", version: "1" } } });
	else if (m.method === "tools/list")
		out({ jsonrpc: "2.0", id: m.id, result: { tools: [{ name: "read",
		    inputSchema: { type: "object" } }] } });
	else
		out({ jsonrpc: "2.0", id: m.id, result: { content: [{ type: "text",
		    text: cache(m.params.arguments.path) }] } });
});
const files = new Map();
function cache(p) {
	if (!files.has(p))
		files.set(p, fs.readFileSync(path.join(ws, p), "utf8"));
	return files.get(p);
}`;

async function main() {
	await startDaemon();
	const gbrArgs = ["mcp", "--workspace", ws];
	const fsArgs = [fsServer, ws];

	const g = await sdkServer("gbrctl mcp + gbrd", gbrctl, gbrArgs, "read_file");
	const r = await sdkServer("server-filesystem", process.execPath, fsArgs,
	    "read_text_file");
	const memIdle = { g: mem(g.pid), d: mem(daemon.pid), r: mem(r.pid) };
	const cpu0 = { g: cpu(g.pid), d: cpu(daemon.pid), r: cpu(r.pid) };
	await race(g, r);
	const cpu1 = { g: cpu(g.pid), d: cpu(daemon.pid), r: cpu(r.pid) };
	const memAfter = { g: mem(g.pid), d: mem(daemon.pid), r: mem(r.pid) };
	// Per timed call (the warm-up calls are counted too: 200 more each).
	const per = (k) => ((cpu1[k] - cpu0[k]) / (calls + 200) / 1000).toFixed(0).padStart(6) + " us";
	const gs = stats(g), rs = stats(r);
	await g.close();
	await r.close();
	const fl = await sdkServer("floor (from memory)", process.execPath,
	    ["-e", floorScript, ws], "read");
	await race(fl, { call: async () => {} });
	const fls = stats(fl);
	await fl.close();

	const gr = await rawServer("gbrctl mcp + gbrd", gbrctl, gbrArgs, "read_file");
	const rr = await rawServer("server-filesystem", process.execPath, fsArgs,
	    "read_text_file");
	await race(gr, rr);
	const grs = stats(gr), rrs = stats(rr);
	await gr.close();
	await rr.close();
	const dg = await directGbrd();
	await race(dg, { call: async () => {} });
	const dgs = stats(dg);
	await dg.close();

	const sizes = files.map((f) => f.text.length);
	console.log(`read_file vs read_text_file, ${calls} calls each, 16 files of ` +
	    `${Math.min(...sizes)}-${Math.max(...sizes)} bytes, blocks of ${block}, ` +
	    `200 warm-up calls; node ${process.version}, ` +
	    `@modelcontextprotocol/sdk client over stdio`);
	console.log("");
	console.log("client: the SDK's Client (what an MCP host runs)");
	console.log(`  ${"".padEnd(22)} ${"p50".padStart(9)} ${"p99".padStart(9)}`);
	console.log(`  ${g.label.padEnd(22)} ${us(gs.p50)} ${us(gs.p99)}`);
	console.log(`  ${r.label.padEnd(22)} ${us(rs.p50)} ${us(rs.p99)}`);
	console.log(`  ${"reference / gbr".padEnd(22)} ${ratio(gs.p50, rs.p50).padStart(9)} ` +
	    `${ratio(gs.p99, rs.p99).padStart(9)}   goal: >= 10x at p50 and p99: ` +
	    (Number(rs.p50) >= 10 * Number(gs.p50) && Number(rs.p99) >= 10 * Number(gs.p99) ?
	    "met" : "NOT met"));
	console.log(`  ${fl.label.padEnd(22)} ${us(fls.p50)} ${us(fls.p99)}   ` +
	    `(the same client against a server answering from memory: ` +
	    `nothing can be faster)`);
	console.log(`  ${"reference / floor".padEnd(22)} ${ratio(fls.p50, rs.p50).padStart(9)} ` +
	    `${ratio(fls.p99, rs.p99).padStart(9)}   (the most any server could gain here)`);
	console.log("client: bare JSON lines, no SDK (the servers' own share shows)");
	console.log(`  ${gr.label.padEnd(22)} ${us(grs.p50)} ${us(grs.p99)}`);
	console.log(`  ${rr.label.padEnd(22)} ${us(rrs.p50)} ${us(rrs.p99)}`);
	console.log(`  ${"reference / gbr".padEnd(22)} ${ratio(grs.p50, rrs.p50).padStart(9)} ` +
	    `${ratio(grs.p99, rrs.p99).padStart(9)}`);
	console.log(`  ${dg.label.padEnd(22)} ${us(dgs.p50)} ${us(dgs.p99)}   ` +
	    `(gbrd's protocol on its socket: the bridge's share is the difference)`);
	console.log("CPU time per call, the server processes alone (load-independent)");
	console.log(`  gbrctl mcp ${per("g")}   gbrd ${per("d")}   server-filesystem ${per("r")}`);
	console.log("");
	const kb = (v) => (isNaN(v) ? "?" : (v / 1024).toFixed(1) + " MiB").padStart(9);
	console.log("memory, RSS (PSS: shared pages split), idle after connect -> after the calls");
	console.log(`  gbrctl mcp (the bridge)   RSS ${kb(memIdle.g.rss)} -> ${kb(memAfter.g.rss)}` +
	    `   PSS ${kb(memIdle.g.pss)} -> ${kb(memAfter.g.pss)}`);
	console.log(`  gbrd (whole daemon)       RSS ${kb(memIdle.d.rss)} -> ${kb(memAfter.d.rss)}` +
	    `   PSS ${kb(memIdle.d.pss)} -> ${kb(memAfter.d.pss)}`);
	const sum = (a, b) => a + b;
	console.log(`  gbr, bridge + all of gbrd RSS ${kb(sum(memIdle.g.rss, memIdle.d.rss))} -> ` +
	    `${kb(sum(memAfter.g.rss, memAfter.d.rss))}   PSS ${kb(sum(memIdle.g.pss, memIdle.d.pss))} -> ` +
	    `${kb(sum(memAfter.g.pss, memAfter.d.pss))}`);
	console.log(`  server-filesystem (node)  RSS ${kb(memIdle.r.rss)} -> ${kb(memAfter.r.rss)}` +
	    `   PSS ${kb(memIdle.r.pss)} -> ${kb(memAfter.r.pss)}`);
	console.log("  (gbrd is shared by every client and session; here it serves only " +
	    "this bench, so all of it is counted against gbr.)");
	console.log(`  goal: gbr's total below the reference's: ` +
	    `${sum(memAfter.g.rss, memAfter.d.rss) < memAfter.r.rss ? "met" : "NOT met"} (RSS), ` +
	    `${sum(memAfter.g.pss, memAfter.d.pss) < memAfter.r.pss ? "met" : "NOT met"} (PSS)`);
}

try {
	await main();
	cleanup();
	process.exit(0);
} catch (e) {
	console.error("bench-mcp: " + (e?.stack ?? e));
	cleanup();
	process.exit(1);
}
