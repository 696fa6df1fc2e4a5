#!/usr/bin/env node
// The `aai-gateway` command of the npm package: finds the binary of this platform's
// package (@aai-gateway/<os>-<cpu>, an optional dependency npm installed for this machine
// only) and runs it. MCP clients talk JSON-RPC to the binary through this launcher, so it
// never writes to stdout: stdin, stdout and stderr are the binary's own (inherited), the
// signals a client sends to stop it are passed on, and its exit status is ours.
"use strict";

const { spawn } = require("child_process");

function binary() {
  const override = process.env.AAI_GATEWAY_BINARY;
  if (override) return override;
  const name = `@aai-gateway/${process.platform}-${process.arch}`;
  const exe = process.platform === "win32" ? "aai-gateway.exe" : "aai-gateway";
  try {
    // Resolved from here, so global installs, npx and nested node_modules all work.
    const manifest = require.resolve(`${name}/package.json`);
    return require("path").join(require("path").dirname(manifest), "bin", exe);
  } catch {
    process.stderr.write(
      `aai-gateway: no binary for this platform (${process.platform}-${process.arch}): the package ` +
        `${name} is not installed. npm installs it with aai-gateway unless optional dependencies ` +
        `are left out (--omit=optional, --no-optional) or this platform has no build (there are ` +
        `linux-x64, linux-arm64, darwin-x64, darwin-arm64 and win32-x64). Reinstall with optional ` +
        `dependencies, install another way (uvx aai-gateway, cargo install --locked aai-gateway), ` +
        `or set AAI_GATEWAY_BINARY to a binary of your own.\n`,
    );
    process.exit(1);
  }
}

// An asynchronous spawn, not spawnSync: while spawnSync waits, node runs no signal
// handler, so a SIGTERM from the client would end this launcher and leave the binary
// running with nobody to stop it.
const child = spawn(binary(), process.argv.slice(2), { stdio: "inherit", windowsHide: true });

const forwarded = ["SIGINT", "SIGTERM", "SIGHUP"];
for (const signal of forwarded) {
  // SIGHUP cannot be listened to on Windows; the others can.
  try {
    process.on(signal, () => child.kill(signal));
  } catch {}
}

child.on("error", (e) => {
  process.stderr.write(`aai-gateway: cannot run ${e.path || "the binary"}: ${e.message}\n`);
  process.exit(1);
});

child.on("exit", (code, signal) => {
  if (signal) {
    // Die of the same signal, so that whoever started us sees what happened.
    for (const s of forwarded) process.removeAllListeners(s);
    // Should the signal be one node ignores (SIGPIPE), exit as a shell reports it.
    process.exitCode = 128 + (require("os").constants.signals[signal] || 0);
    process.kill(process.pid, signal);
    return;
  }
  process.exit(code === null ? 1 : code);
});
