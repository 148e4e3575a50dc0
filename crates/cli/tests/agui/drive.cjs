// Drives a `provrun serve` with the official AG-UI client (@ag-ui/client, pinned by the
// Rust test that starts this script), scenario by scenario, and prints one JSON report on
// stdout. The client's own checks stay on (its schema enforcement and its event-order
// verification run inside runAgent); any warning it prints about our events fails the
// scenario too. Every response's raw SSE bytes are written to CAPTURE_DIR/NAME-N.sse for
// ag-ui-validate.
//
// Usage: node drive.cjs URL TOKEN CAPTURE_DIR
"use strict";

const fs = require("fs");
const path = require("path");
const { HttpAgent } = require("@ag-ui/client");

const [url, token, captureDir] = process.argv.slice(2);

// Warnings the client prints about what it received (stripped members, dropped events).
const warnings = [];
const warn = console.warn;
console.warn = (...args) => {
  warnings.push(args.map(String).join(" "));
  warn(...args);
};

/// A fetch that keeps a copy of each response's bytes in CAPTURE_DIR/NAME-N.sse.
function capturingFetch(name) {
  let n = 0;
  return async (target, init) => {
    const response = await fetch(target, init);
    if (!response.body) return response;
    const [mine, theirs] = response.body.tee();
    const file = path.join(captureDir, `${name}-${++n}.sse`);
    (async () => {
      const chunks = [];
      const reader = mine.getReader();
      try {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          chunks.push(Buffer.from(value));
        }
      } catch (_) {
        // an aborted request ends its copy early
      }
      fs.writeFileSync(file, Buffer.concat(chunks));
    })();
    return new Response(theirs, { status: response.status, headers: response.headers });
  };
}

function agent(name, threadId) {
  return new HttpAgent({
    url: `${url}agents/${name}`,
    headers: token ? { Authorization: `Bearer ${token}` } : {},
    threadId,
    fetch: capturingFetch(threadId),
  });
}

function user(a, text) {
  a.addMessage({ id: `u-${a.messages.length}`, role: "user", content: text });
}

/// Runs one request, recording every event the client's subscribers saw (and handing
/// each to `each`, when given).
async function run(a, parameters, each) {
  const events = [];
  const pending = [];
  const result = await a.runAgent(parameters, {
    onEvent: ({ event }) => {
      events.push(event);
      if (each) pending.push(each(event));
    },
  });
  await Promise.all(pending);
  return { events, result: result.result ?? null, newMessages: result.newMessages };
}

/// POST a control request (cancel, steer) to the server.
async function control(route, body) {
  return fetch(`${url}${route}`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      ...(token ? { Authorization: `Bearer ${token}` } : {}),
    },
    body: body === null ? "" : JSON.stringify(body),
  });
}

function finished(events) {
  return events.find((e) => e.type === "RUN_FINISHED") ?? null;
}

function bundleOf(events) {
  const custom = events.find((e) => e.type === "CUSTOM" && e.name === "provrun.bundle");
  return custom ? custom.value : null;
}

const frontendTools = [
  {
    name: "pick_colour",
    description: "Ask the person to pick a colour.",
    parameters: { type: "object", properties: { hint: { type: "string" } } },
  },
];

const scenarios = {
  async plain() {
    const a = agent("chat", "plain");
    user(a, "Hello?");
    const r = await run(a);
    return { runs: [r], messages: a.messages };
  },
  async streamed() {
    const a = agent("stream", "streamed");
    user(a, "Think, then answer.");
    const r = await run(a);
    return { runs: [r], messages: a.messages };
  },
  async tools() {
    const a = agent("tools", "tools");
    user(a, "Write a note and read it back.");
    const r = await run(a);
    return { runs: [r], messages: a.messages };
  },
  async approval() {
    const a = agent("approve", "approval");
    user(a, "Write the file.");
    const first = await run(a);
    const interrupts = a.pendingInterrupts.map((i) => i.id);
    const resume = a.pendingInterrupts.map((i) => ({ interruptId: i.id, status: "resolved" }));
    const second = await run(a, { resume });
    return { runs: [first, second], interrupts, messages: a.messages };
  },
  async frontend() {
    const a = agent("frontend", "frontend");
    user(a, "Pick a colour for me.");
    const first = await run(a, { tools: frontendTools });
    const outcome = finished(first.events).outcome;
    for (const id of outcome.pendingToolCallIds ?? []) {
      a.addMessage({ id: `t-${id}`, role: "tool", toolCallId: id, content: "teal" });
    }
    const second = await run(a, { tools: frontendTools });
    return { runs: [first, second], messages: a.messages };
  },
  async thread() {
    const a = agent("chat", "thread");
    user(a, "First turn.");
    const first = await run(a);
    user(a, "Second turn.");
    const second = await run(a);
    return { runs: [first, second], messages: a.messages };
  },
  // The client aborts its request: the server cancels the run (its stream is cut by the
  // client, so it is not given to the validator).
  async abort() {
    const a = agent("slow", "abort");
    user(a, "Take your time.");
    let started = null;
    const how = await a
      .runAgent(undefined, {
        onRunStartedEvent: ({ event }) => {
          started = event;
          setTimeout(() => a.abortRun(), 300);
        },
      })
      .then(() => "ended", (e) => `failed: ${e}`);
    return { how, started };
  },
  // POST /runs/ID/cancel while the run waits on the model: the stream ends "cancelled".
  async cancel() {
    const a = agent("slow", "cancel");
    user(a, "Take your time.");
    let answer = null;
    const r = await run(a, undefined, async (event) => {
      if (event.type === "RUN_STARTED") {
        const res = await control(`runs/${event.metadata.bundle}/cancel`, null);
        answer = res.status;
      }
    });
    return { runs: [r], answer };
  },
  // POST /runs/ID/steer: the message is added before the run's next model request.
  async steer() {
    const a = agent("steer", "steer");
    user(a, "Write something.");
    let answer = null;
    const r = await run(a, undefined, async (event) => {
      if (event.type === "RUN_STARTED") {
        const res = await control(`runs/${event.metadata.bundle}/steer`, { message: "Mention blue." });
        answer = res.status;
      }
    });
    return { runs: [r], answer };
  },
};

(async () => {
  const report = {};
  for (const [name, scenario] of Object.entries(scenarios)) {
    const before = warnings.length;
    try {
      const out = await scenario();
      out.runs = (out.runs ?? []).map((r) => ({
        finished: finished(r.events),
        bundle: bundleOf(r.events),
        types: r.events.map((e) => e.type),
        events: r.events,
        result: r.result,
      }));
      report[name] = { ok: true, ...out, warnings: warnings.slice(before) };
    } catch (e) {
      report[name] = { ok: false, error: String(e && e.stack ? e.stack : e), warnings: warnings.slice(before) };
    }
  }
  // Let the capture copies finish writing.
  await new Promise((r) => setTimeout(r, 200));
  process.stdout.write(JSON.stringify(report));
})();
