// provrun view (a listing): renders the runs embedded in #listing-data as a table with
// sorting, filters, search and pages. Every string in a run came from a bundle: it only
// ever enters the page through textContent; the one link per row is made from the id,
// which the command checked is a plain name, and is percent-encoded here besides.
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("listing-data").textContent);
  // A run: [id, agent, model, status, verdict, failed checks, started, duration_ms,
  // steps, tool_calls, tokens, tools, search text].
  var RUNS = D.runs || [];
  var PAGE = D.page_size || 100;
  var COLS = [
    ["Run", 0], ["Agent", 1], ["Model", 2], ["Status", 3], ["Verify", 4], ["Started", 6],
    ["Duration", 7], ["Steps", 8], ["Tool calls", 9], ["Tokens", 10]
  ];
  var state = { sort: 6, up: false, page: 0, q: "", status: "", verdict: "", agent: "", model: "", tool: "" };
  var shown = [];

  function $(id) { return document.getElementById(id); }
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
  function dur(ms) {
    if (!ms) return "0 ms";
    if (ms < 1000) return ms + " ms";
    if (ms < 60000) return (ms / 1000).toFixed(1) + " s";
    return Math.floor(ms / 60000) + " min " + Math.round((ms % 60000) / 1000) + " s";
  }
  function distinct(pick) {
    var seen = Object.create(null), out = [];
    RUNS.forEach(function (r) {
      pick(r).forEach(function (v) { if (v !== "" && !seen[v]) { seen[v] = 1; out.push(v); } });
    });
    return out.sort();
  }
  function fill(id, values) {
    var s = $(id);
    values.forEach(function (v) { var o = el("option", null, v); o.value = v; s.appendChild(o); });
  }
  // Lower-cased text of each run, built once, for the search.
  var HAY = RUNS.map(function (r) {
    return [r[0], r[1], r[2], r[3], r[4], r[5], r[11], r[12]].join("\n").toLowerCase();
  });

  function compute() {
    var q = state.q.toLowerCase();
    var out = [];
    for (var i = 0; i < RUNS.length; i++) {
      var r = RUNS[i];
      if (state.status && r[3] !== state.status) continue;
      if (state.verdict && r[4] !== state.verdict) continue;
      if (state.agent && r[1] !== state.agent) continue;
      if (state.model && r[2] !== state.model) continue;
      if (state.tool && r[11].split("\n").indexOf(state.tool) < 0) continue;
      if (q && HAY[i].indexOf(q) < 0) continue;
      out.push(i);
    }
    var k = state.sort, sign = state.up ? 1 : -1;
    out.sort(function (a, b) {
      var x = RUNS[a][k], y = RUNS[b][k];
      if (x < y) return -sign;
      if (x > y) return sign;
      return RUNS[a][0] < RUNS[b][0] ? -1 : 1;
    });
    shown = out;
  }

  function row(r) {
    var tr = el("tr");
    var id = el("td", "id"), a = el("a", null, r[0]);
    a.setAttribute("href", "runs/" + encodeURIComponent(r[0]) + (D.suffix || ""));
    id.appendChild(a);
    tr.appendChild(id);
    tr.appendChild(el("td", null, r[1]));
    tr.appendChild(el("td", null, r[2]));
    tr.appendChild(el("td", r[3] === "never finished" ? "never" : r[3], r[3]));
    var v = el("td", r[4], r[4]);
    if (r[5]) v.appendChild(el("div", "checks", r[5]));
    tr.appendChild(v);
    tr.appendChild(el("td", "when", String(r[6]).replace("T", " ").replace(/(\.\d+)?Z$/, "")));
    tr.appendChild(el("td", "num", dur(r[7])));
    tr.appendChild(el("td", "num", r[8]));
    tr.appendChild(el("td", "num", r[9]));
    tr.appendChild(el("td", "num", r[10]));
    return tr;
  }

  function draw() {
    var pages = Math.max(1, Math.ceil(shown.length / PAGE));
    if (state.page >= pages) state.page = pages - 1;
    var body = $("rows"), frag = document.createDocumentFragment();
    var from = state.page * PAGE, to = Math.min(shown.length, from + PAGE);
    for (var i = from; i < to; i++) frag.appendChild(row(RUNS[shown[i]]));
    if (!shown.length) {
      var tr = el("tr"), td = el("td", "empty", "No run matches.");
      td.colSpan = COLS.length;
      tr.appendChild(td);
      frag.appendChild(tr);
    }
    body.textContent = "";
    body.appendChild(frag);
    $("count").textContent = shown.length + " of " + RUNS.length + " runs";
    $("pageno").textContent = "page " + (state.page + 1) + " of " + pages;
    $("prev").disabled = state.page === 0;
    $("next").disabled = state.page >= pages - 1;
    Array.prototype.forEach.call($("cols").children, function (th, n) {
      th.className = COLS[n][1] === state.sort ? "sorted" + (state.up ? " up" : "") : "";
    });
  }
  function refresh() { compute(); state.page = 0; draw(); }

  $("title").textContent = inert(D.title || "runs");
  var failing = RUNS.filter(function (r) { return r[4] !== "verifies"; }).length;
  $("totals").textContent = RUNS.length + " runs, " + failing + " not verifying" +
    (D.note ? " · " + D.note : "");
  COLS.forEach(function (c) {
    var th = el("th", null, c[0]);
    th.addEventListener("click", function () {
      if (state.sort === c[1]) state.up = !state.up; else { state.sort = c[1]; state.up = c[1] < 6; }
      compute(); draw();
    });
    $("cols").appendChild(th);
  });
  fill("f-status", distinct(function (r) { return [r[3]]; }));
  fill("f-verdict", distinct(function (r) { return [r[4]]; }));
  fill("f-agent", distinct(function (r) { return [r[1]]; }));
  fill("f-model", distinct(function (r) { return [r[2]]; }));
  fill("f-tool", distinct(function (r) { return r[11] ? r[11].split("\n") : []; }));
  ["status", "verdict", "agent", "model", "tool"].forEach(function (f) {
    $("f-" + f).addEventListener("change", function (e) { state[f] = e.target.value; refresh(); });
  });
  var timer = null;
  $("search").addEventListener("input", function (e) {
    state.q = e.target.value;
    clearTimeout(timer);
    timer = setTimeout(refresh, 60);
  });
  $("prev").addEventListener("click", function () { state.page--; draw(); });
  $("next").addEventListener("click", function () { state.page++; draw(); });
  compute();
  draw();
  document.body.setAttribute("data-render-ms", String(Math.round(performance.now())));
  // A link can carry filters: #q=TEXT&status=S&verdict=V&agent=A&model=M&tool=T.
  var asked = false;
  (location.hash || "").replace(/^#/, "").split("&").forEach(function (part) {
    var eq = part.indexOf("=");
    if (eq < 0) return;
    var key = part.slice(0, eq), value;
    try { value = decodeURIComponent(part.slice(eq + 1).replace(/\+/g, " ")); } catch (e) { return; }
    if (key === "q") { state.q = value; $("search").value = value; asked = true; }
    else if (Object.prototype.hasOwnProperty.call(state, key) && typeof state[key] === "string") {
      state[key] = value; $("f-" + key).value = value; asked = true;
    }
  });
  if (asked) {
    var t0 = performance.now();
    refresh();
    document.body.setAttribute("data-filter-ms", String(Math.round(performance.now() - t0)));
  }
  document.body.setAttribute("data-ready", "1");
})();
