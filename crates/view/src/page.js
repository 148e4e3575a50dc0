// provrun view: renders the bundle data embedded in #bundle-data. Every string in it came
// from a model, a tool or an input: it only ever enters the page through textContent.
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("bundle-data").textContent);

  // Controls (ESC and the rest of C0 but newline and tab, DEL, C1), bidi overrides and
  // isolates, and other invisible format characters in a bundle's text are shown as
  // visible escapes (\x1b, \u{202e}) and never act on the page: the rule of the CLI's
  // terminal output (crates/cli/src/inert.rs). Newlines and tabs keep their layout.
  var UNSAFE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u00ad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\u3164\ufeff\uffa0\ufff9-\ufffb\u{110bd}\u{110cd}\u{13430}-\u{1343f}\u{1bca0}-\u{1bca3}\u{1d173}-\u{1d17a}\u{e0001}\u{e0020}-\u{e007f}]/gu;
  function inert(text) {
    return String(text).replace(UNSAFE, function (c) {
      var n = c.codePointAt(0);
      return n <= 0x9f ? "\\x" + (n < 16 ? "0" : "") + n.toString(16) : "\\u{" + n.toString(16) + "}";
    });
  }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = inert(text);
    return e;
  }
  function add(parent) {
    for (var i = 1; i < arguments.length; i++) if (arguments[i]) parent.appendChild(arguments[i]);
    return parent;
  }
  function badge(text, cls) { return el("span", "badge" + (cls ? " " + cls : ""), text); }
  function pre(text) { return el("pre", null, text); }
  function label(text) { return el("div", "label", text); }
  function ms(n) { return n === null || n === undefined ? "" : n + " ms"; }
  function size(b) {
    if (b < 1024) return b + " B";
    if (b < 1048576) return (b / 1024).toFixed(1) + " KiB";
    return (b / 1048576).toFixed(1) + " MiB";
  }
  function wall(a, b) {
    var t = Date.parse(b) - Date.parse(a);
    if (!isFinite(t)) return "";
    if (t < 1000) return t + " ms";
    if (t < 60000) return (t / 1000).toFixed(1) + " s";
    return Math.floor(t / 60000) + " min " + Math.round((t % 60000) / 1000) + " s";
  }
  function fact(parent, name, value) {
    var s = el("span");
    add(s, el("b", null, name), document.createTextNode(inert(value)));
    parent.appendChild(s);
  }

  // ---- header ----
  var R = D.run || {};
  document.title = inert("provrun view · " + (R.agent || "bundle"));
  var head = document.getElementById("head");
  add(head, el("h1", null, "Run " + (R.run_id || "?") + " · agent " + (R.agent || "?")));
  var facts = el("div", "facts");
  fact(facts, "bundle", D.bundle);
  fact(facts, "model", R.model || "?");
  fact(facts, "status", R.status || "?");
  fact(facts, "started", R.started || "?");
  fact(facts, "ended", R.ended || "?");
  fact(facts, "wall time", R.started && R.ended ? wall(R.started, R.ended) : "?");
  fact(facts, "model requests", R.requests);
  fact(facts, "tool calls", R.tool_calls);
  fact(facts, "tokens in/out", R.input_tokens + " / " + R.output_tokens);
  fact(facts, "events", R.events);
  if (R.error) fact(facts, "error", R.error);
  head.appendChild(facts);
  var V = D.verify;
  var verdictText = {
    verifies: "The bundle verifies: every check passes.",
    fails: "THE BUNDLE DOES NOT VERIFY: do not trust what it says.",
    incomplete: "The run never finished: the chain is valid but the log stops early."
  }[V.verdict];
  var verdict = add(el("div", "verdict " + V.verdict), el("div", null, verdictText));
  verdict.id = "verdict";
  if (D.log_error) verdict.appendChild(el("div", null, "The log cannot be read: " + D.log_error));
  var checks = el("table", "checks");
  V.checks.forEach(function (c) {
    var tr = el("tr");
    add(tr, el("td", c.status, c.status), el("td", "mono", c.code), el("td", null, c.detail));
    checks.appendChild(tr);
  });
  verdict.appendChild(checks);
  head.appendChild(verdict);

  // ---- claims against observations (a wrapped program's session log vs its processes) ----
  var C = D.claims;
  if (C) {
    var cl = el("div", "entry" + (C.unobserved.length || C.unclaimed.length ? " bad" : " ok"));
    cl.id = "claims";
    add(cl, add(el("div"), badge("claims", C.unobserved.length || C.unclaimed.length ? "warn" : "good"),
      el("span", "dim", C.traced ? " " + C.claims + " claimed commands, " + C.matched + " matched to observed processes; " +
        C.processes + " processes observed" + (C.trail_complete ? "" : " (the trail did not see everything)")
        : " " + C.claims + " claimed commands, and no process trail to match them against")));
    C.unobserved.forEach(function (c) {
      add(cl, add(el("div"), badge("claimed, not observed", "warn"), el("b", null, " " + c.name),
        el("span", "dim mono", " " + c.call + " "), el("span", "mono", c.command)));
    });
    C.unclaimed.forEach(function (p) {
      add(cl, add(el("div"), badge("observed, not claimed", "warn"), el("span", "dim", " process #" + p.id + " "),
        el("span", "mono", p.argv)));
    });
    head.appendChild(cl);
  }

  // ---- conversation start ----
  var conv = document.getElementById("conversation");
  if (D.conversation.length) {
    conv.appendChild(el("h2", null, "Conversation start"));
    D.conversation.forEach(function (m) {
      add(conv, add(el("div", "entry"), label(m.role), el("div", "msg", m.text)));
    });
  }

  // ---- raw bytes ----
  function rawButton(name, hex) {
    var wrap = el("div");
    if (!hex) return null;
    var b = D.blobs[hex] || {};
    var btn = el("button", "link", "raw " + name + " bytes (" + size(b.size || 0) + ", " + (b.media_type || "?") + ")");
    btn.type = "button";
    var shown = null;
    btn.addEventListener("click", function () {
      if (shown) { shown.remove(); shown = null; return; }
      shown = el("div", "raw");
      shown.appendChild(el("div", "label mono", "sha256 " + hex));
      if (b.text !== undefined) {
        shown.appendChild(pre(b.text));
        if (b.omitted) shown.appendChild(el("div", "note", b.omitted + " bytes are left out above"));
      } else {
        shown.appendChild(el("div", "note", b.missing || "not embedded"));
      }
      if (b.text === undefined || b.omitted) {
        shown.appendChild(el("div", "note mono", "all bytes: provrun cat BUNDLE " + hex));
      }
      wrap.appendChild(shown);
    });
    wrap.appendChild(btn);
    return wrap;
  }

  // ---- steps ----
  var steps = D.steps;
  var stepOfSeq = {};
  steps.forEach(function (s, i) {
    s.failed = 0; s.tools = [];
    s.entries.forEach(function (e) {
      stepOfSeq[e.seq] = i;
      if (e.kind === "tool") {
        s.tools.push(e.name);
        if (!e.deferred && e.ok === false) s.failed++;
      }
    });
    if (s.model) stepOfSeq[s.model.seq] = i;
    if (s.model && s.model.error) s.failed++;
  });

  function jumpButton(text, seq) {
    var b = el("button", "link", text);
    b.type = "button";
    b.addEventListener("click", function () { jumpToSeq(seq); });
    return b;
  }

  function toolEntry(e) {
    var cls = e.deferred ? "deferred" : e.ok ? "ok" : "bad";
    var d = el("div", "entry " + cls);
    d.id = "ev-" + e.seq;
    var line = el("div");
    add(line, badge(e.deferred ? "waits" : e.ok ? "ok" : "failed", e.deferred ? "warn" : e.ok ? "good" : "bad"),
      el("b", null, e.name), document.createTextNode(" "), el("span", "dim mono", e.call_id),
      document.createTextNode(" "), e.deferred ? null : el("span", "dim", ms(e.duration_ms)));
    if (e.decided_by) line.appendChild(badge("decided by " + e.decided_by));
    if (e.mode && e.mode !== "in_process") line.appendChild(badge(e.mode));
    if (e.mcp_server) line.appendChild(badge("MCP server " + e.mcp_server, "conf"));
    if (e.confidence !== "observed") line.appendChild(badge("confidence " + e.confidence, "conf"));
    if (e.waits_for === "permit") line.appendChild(badge("waits for a permit in the running process", "warn"));
    if (e.timed_out) line.appendChild(badge("timed out", "bad"));
    if (e.cancelled) line.appendChild(badge("cancelled", "bad"));
    if (e.output_tool) line.appendChild(badge("final result"));
    if (e.provider_run) line.appendChild(badge("run by the provider"));
    if (e.resumed) line.appendChild(badge("resumed here", "warn"));
    d.appendChild(line);
    if (e.completed_seq !== undefined) d.appendChild(jumpButton("→ completed at event " + e.completed_seq, e.completed_seq));
    if (e.deferred_seq !== undefined) d.appendChild(jumpButton("← deferred at event " + e.deferred_seq, e.deferred_seq));
    add(d, label("arguments"), pre(e.arguments));
    if (e.arguments_cut) d.appendChild(el("div", "note", "arguments cut here"));
    if (!e.deferred) {
      add(d, label("result"), pre(e.result));
      if (e.result_cut) d.appendChild(el("div", "note", "result cut here"));
    }
    if (e.mcp) {
      var det = el("details");
      add(det, el("summary", null, "MCP call (the server's claims: confidence " + (e.mcp_confidence || "?") + ")"), pre(e.mcp));
      d.appendChild(det);
    }
    if (e.confinement) {
      var c = el("details");
      add(c, el("summary", null, "confinement of the program it ran"), pre(e.confinement));
      d.appendChild(c);
    }
    return d;
  }

  function entryNode(e) {
    if (e.kind === "tool") return toolEntry(e);
    var d = el("div", "entry");
    d.id = "ev-" + e.seq;
    if (e.kind === "declared") {
      d.className = "entry claim";
      add(d, add(el("div"), badge("declared", "conf"), badge("confidence " + e.confidence, "conf"),
        el("b", null, e.declared_kind), el("span", "dim", " by " + (e.source || "a tool"))), pre(e.data));
    } else if (e.kind === "steered") {
      add(d, add(el("div"), badge("steered", "warn"), el("span", "dim", " a message from the caller, added before model request " + e.before_request)), pre(e.text));
    } else if (e.kind === "trace") {
      add(d, el("div", "dim", (e.source ? "the program's session log " + e.source + " imported (" : "message history recorded (") +
        e.messages + (e.source ? " lines, " : " messages, ") + e.format + "; confidence " + e.confidence + ")"));
    } else if (e.kind === "http") {
      d.className = "entry" + (e.error ? " bad" : "");
      add(d, add(el("div"), badge("http " + e.http_kind), el("span", "mono", " " + e.method + " " + e.path),
        el("span", "dim", " · " + (e.status == null ? "no response" : e.status) + " · " + ms(e.duration_ms))));
      if (e.error) d.appendChild(pre(e.error));
    } else if (e.kind === "connection") {
      d.className = "entry" + (e.outcome === "tunneled" ? "" : " bad");
      add(d, add(el("div"), badge("connection " + e.outcome, e.outcome === "tunneled" ? "good" : "bad"),
        el("span", "mono", " " + e.host + ":" + e.port), el("span", "dim", " via " + e.via + " · " + e.bytes_sent +
        " B sent, " + e.bytes_received + " B received · " + ms(e.duration_ms))));
      if (e.reason) d.appendChild(el("div", "dim", e.reason));
    } else if (e.kind === "program") {
      d.className = "entry " + (e.exit_code === 0 ? "ok" : "bad");
      add(d, add(el("div"), badge("program exited", e.exit_code === 0 ? "good" : "bad"), el("span", "mono", " " + e.argv),
        el("span", "dim", " · code " + (e.exit_code == null ? "none" : e.exit_code) + " · " + ms(e.duration_ms) +
        " · stdout " + e.stdout_size + " B, stderr " + e.stderr_size + " B" +
        (e.forwarded_signal ? " · " + e.forwarded_signal + " passed on" : ""))));
      if (e.confinement) {
        var c = el("details");
        add(c, el("summary", null, "confinement it ran under"), pre(e.confinement));
        d.appendChild(c);
      }
    } else if (e.kind === "process") {
      var done = e.exit_code === 0 || e.replaced;
      d.className = "entry" + (done ? "" : " bad");
      var how = e.exit_code !== null && e.exit_code !== undefined ? "exit " + e.exit_code :
        e.signal ? "signal " + e.signal : e.replaced ? "exec'd another image" : e.ended ? "ended" : "still running when the trail ended";
      add(d, add(el("div"), badge("process #" + e.id, done ? "good" : "bad"),
        el("span", "mono", " " + e.argv + (e.argv_cut ? " …" : "")),
        el("span", "dim", " · " + how + (e.parent ? " · started by #" + e.parent : "") + " · " + e.owner)));
      add(d, el("div", "dim mono", (e.exec ? e.exe + " sha256 " + (e.exe_sha256 || ("not hashed: " + (e.exe_error || "?"))) : "forked, no exec") +
        " · cwd " + (e.cwd || "?") + " · uid " + (e.uid === null ? "?" : e.uid) + " · pid " + e.pid + " · " + e.started +
        (e.ended ? " → " + e.ended : "")));
    } else if (e.kind === "trail") {
      d.className = "entry" + (e.complete ? "" : " bad");
      add(d, add(el("div"), badge("process trail", e.complete ? "good" : "warn"), el("span", "dim",
        " " + e.owner + " · " + e.processes + " processes, " + e.execs + " execs, " + e.forks + " forks" +
        (e.not_recorded ? " · " + e.not_recorded + " more counted, not recorded" : ""))));
      if (e.error) d.appendChild(el("div", "note", e.error));
    } else if (e.kind === "change") {
      add(d, add(el("div"), badge(e.change, e.change === "deleted" ? "warn" : null), el("span", "mono", " " + e.path),
        el("span", "dim", " (" + e.entry_kind + (e.before_size !== null ? ", " + size(e.before_size) : "") +
          (e.after_size !== null ? " → " + size(e.after_size) : "") + ")")));
      add(d, el("div", "dim mono", (e.before_sha256 ? "before " + e.before_sha256 + " " : "") + (e.after_sha256 ? "after " + e.after_sha256 : "")));
    } else if (e.kind === "workspace") {
      add(d, add(el("div"), badge("workspace changes"), el("span", "dim", " " + e.created + " created, " + e.modified +
        " modified, " + e.deleted + " deleted" + (e.unhashed ? ", " + e.unhashed + " not hashed" : ""))));
      if (e.diff_error) d.appendChild(el("div", "note", e.diff_error));
      if (e.diff) d.appendChild(rawButton("git diff", e.diff));
    } else if (e.kind === "seen") {
      d.className = "entry" + (e.answered_in ? "" : " bad");
      add(d, add(el("div"), badge("tool call on the wire"), el("b", null, " " + e.name), el("span", "dim mono", " " + e.run_call_id + " " + e.call_id),
        el("span", "dim", e.answered_in ? " · result in request " + e.answered_in + " (" + size(e.result_size) + ")" + (e.result_error ? ", an error" : "")
          : " · no result seen on the wire")), pre(e.arguments));
      if (e.result !== null) d.appendChild(pre(e.result));
    } else if (e.kind === "skipped") {
      d.className = "entry bad";
      add(d, add(el("div"), badge("left out of the outputs", "warn"), el("span", null, e.path),
        el("span", "dim", " (" + e.entry_kind + ": " + e.reason + ")")));
    } else if (e.kind === "end") {
      d.className = "entry " + (e.status === "finished" ? "ok" : e.status === "paused" ? "deferred" : "bad");
      add(d, add(el("div"), badge("run " + e.status, e.status === "finished" ? "good" : e.status === "paused" ? "warn" : "bad"),
        el("span", "dim", e.outputs + " outputs")));
      if (e.error) d.appendChild(pre(e.error));
    }
    if (e.resumed) d.insertBefore(badge("resumed here", "warn"), d.firstChild);
    return d;
  }

  function modelNode(m) {
    var d = el("div", "entry" + (m.error ? " bad" : ""));
    d.id = "ev-" + m.seq;
    add(d, add(el("div"), badge("model"), el("span", null, m.model || ""), el("span", "dim",
      " · " + ms(m.duration_ms) + " · " + (m.input_tokens || 0) + " in / " + (m.output_tokens || 0) + " out tokens" +
      (m.finish_reason ? " · " + m.finish_reason : "") + (m.stream ? " · streamed" : ""))));
    if (m.error) add(d, label("error"), pre(m.error));
    if (m.reasoning) add(d, label("reasoning"), el("div", "msg dim", m.reasoning));
    if (m.text) add(d, label("answer"), el("div", "msg", m.text));
    if (m.tool_calls && m.tool_calls.length) {
      d.appendChild(label("asks for " + m.tool_calls.length + " tool call" + (m.tool_calls.length > 1 ? "s" : "")));
      m.tool_calls.forEach(function (c) {
        add(d, add(el("div"), el("b", null, c.name), el("span", "dim mono", " " + c.id)), pre(c.arguments));
      });
    }
    if (m.parse_error) d.appendChild(el("div", "note", "the response could not be read back: " + m.parse_error));
    if (m.attempts) add(d, label("attempts"), pre(m.attempts));
    add(d, rawButton("request", m.request), rawButton("response", m.response));
    return d;
  }

  var timeline = document.getElementById("timeline");
  timeline.appendChild(el("h2", null, "Timeline: " + steps.filter(function (s) { return s.model; }).length + " model steps"));
  var nodes = [];
  steps.forEach(function (s, i) {
    var box = el("div", "step" + (s.failed ? " failed" : ""));
    box.id = "step-" + i;
    var sum = el("button", "sum");
    sum.type = "button";
    var m = s.model;
    add(sum, el("span", "n", m ? "step " + s.n : "before step 1"),
      el("span", "dim", m ? ms(m.duration_ms) : ""),
      s.failed ? badge(s.failed + " failed", "bad") : null,
      s.resumed ? badge("resumed", "warn") : null,
      el("span", "tools", s.tools.length ? s.tools.join(", ") : (m && m.text ? m.text.slice(0, 120) : "")));
    box.appendChild(sum);
    var body = null;
    function expand(open) {
      if (open && !body) {
        body = el("div", "body");
        if (m) body.appendChild(modelNode(m));
        s.entries.forEach(function (e) { body.appendChild(entryNode(e)); });
        box.appendChild(body);
      } else if (!open && body) {
        body.remove();
        body = null;
      }
    }
    sum.addEventListener("click", function () { expand(!body); });
    nodes.push({ box: box, expand: expand, step: s, hay: null });
    timeline.appendChild(box);
  });
  // A short run opens expanded; a long one opens collapsed.
  if (steps.length <= 12) nodes.forEach(function (n) { n.expand(true); });

  function focusNode(node, seq) {
    document.querySelectorAll(".focus").forEach(function (f) { f.classList.remove("focus"); });
    node.box.classList.remove("hidden");
    node.expand(true);
    var target = seq !== undefined ? document.getElementById("ev-" + seq) : node.box;
    (target || node.box).classList.add("focus");
    (target || node.box).scrollIntoView({ block: "center" });
  }
  function jumpToSeq(seq) {
    var i = stepOfSeq[seq];
    if (i !== undefined) focusNode(nodes[i], seq);
  }

  // ---- navigation ----
  var cursor = -1; // the last entry jumped to, as an index into `order`
  var order = [];  // every tool entry in log order
  steps.forEach(function (s, i) {
    s.entries.forEach(function (e) { if (e.kind === "tool") order.push({ i: i, e: e }); });
  });
  function jumpNext(pred) {
    for (var k = 1; k <= order.length; k++) {
      var j = (cursor + k) % order.length;
      if (pred(order[j].e)) { cursor = j; focusNode(nodes[order[j].i], order[j].e.seq); return true; }
    }
    return false;
  }
  function nextFailed() {
    if (!jumpNext(function (e) { return !e.deferred && e.ok === false; })) {
      document.getElementById("matches").textContent = "no failed call";
    }
  }
  document.getElementById("next-failed").addEventListener("click", nextFailed);
  var select = document.getElementById("tool-jump");
  var names = [];
  order.forEach(function (o) { if (names.indexOf(o.e.name) < 0) names.push(o.e.name); });
  names.sort().forEach(function (n) {
    var o = el("option", null, n);
    o.value = n;
    select.appendChild(o);
  });
  select.addEventListener("change", function () {
    var name = select.value;
    if (name) jumpNext(function (e) { return e.name === name; });
  });
  document.getElementById("expand").addEventListener("click", function () {
    nodes.forEach(function (n) { if (!n.box.classList.contains("hidden")) n.expand(true); });
  });
  document.getElementById("collapse").addEventListener("click", function () {
    nodes.forEach(function (n) { n.expand(false); });
  });
  var search = document.getElementById("search");
  var timer = null;
  function filter() {
    var q = search.value.trim().toLowerCase();
    var shown = 0;
    nodes.forEach(function (n) {
      if (n.hay === null) n.hay = JSON.stringify(n.step).toLowerCase();
      var hit = !q || n.hay.indexOf(q) >= 0;
      n.box.classList.toggle("hidden", !hit);
      if (hit) shown++;
    });
    document.getElementById("matches").textContent = q ? shown + " of " + nodes.length + " steps match" : "";
  }
  search.addEventListener("input", function () {
    clearTimeout(timer);
    timer = setTimeout(filter, 120);
  });

  // A link into the page: #ev-SEQ (an event), #failed (the first failed call),
  // #tool=NAME (the first call of a tool), #search=TEXT (the steps that mention it).
  function applyHash() {
    var h = "";
    try { h = decodeURIComponent(location.hash.slice(1)); } catch (err) { return; }
    cursor = -1;
    if (/^ev-[0-9]+$/.test(h)) jumpToSeq(Number(h.slice(3)));
    else if (h === "failed") nextFailed();
    else if (h.indexOf("tool=") === 0) jumpNext(function (e) { return e.name === h.slice(5); });
    else if (h.indexOf("search=") === 0) { search.value = h.slice(7); filter(); }
  }
  window.addEventListener("hashchange", applyHash);

  // ---- inputs and outputs ----
  var files = document.getElementById("files");
  function fileList(title, list) {
    files.appendChild(el("h2", null, title + " (" + list.length + ")"));
    list.forEach(function (f) {
      var d = el("div", "file entry" + (f.matches === false ? " bad" : ""));
      add(d, add(el("div"), el("b", null, f.path), el("span", "dim", " " + size(f.size) + " · "),
        el("span", "mono dim", "sha256 " + f.sha256)));
      if (f.matches === false) d.appendChild(badge("the file's bytes do not match this digest", "bad"));
      if (f.text !== undefined) {
        d.appendChild(pre(f.text));
        if (f.truncated) d.appendChild(el("div", "note", "truncated: only the first part is shown"));
      }
      if (f.note) d.appendChild(el("div", "note", f.note));
      files.appendChild(d);
    });
  }
  fileList("Inputs", D.inputs);
  fileList("Outputs", D.outputs);
  applyHash();
  document.body.setAttribute("data-rendered", "yes");
})();
