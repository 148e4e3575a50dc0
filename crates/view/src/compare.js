// provrun view A B: two runs side by side, from the comparison in #compare-data. Every
// string in it came from a bundle: it only ever enters the page through textContent.
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("compare-data").textContent);
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
  function str(v) { return typeof v === "string" ? v : JSON.stringify(v); }
  var diffAt = Object.create(null);
  (D.differences || []).forEach(function (d) { if (d.step !== undefined) diffAt[d.step] = 1; });

  var h = $("verdict");
  h.textContent = D.same ? "The same behaviour" : (D.differences.length + " differences");
  h.className = D.same ? "same" : "differs";
  var head = el("tr");
  ["", "A", "B"].forEach(function (t) { head.appendChild(el("th", t ? null : "n", t)); });
  $("sides").appendChild(head);
  ["bundle", "agent", "model", "status", "verdict", "steps", "tool_calls", "tokens", "duration_ms"].forEach(function (k) {
    var tr = el("tr");
    tr.appendChild(el("th", "n", k));
    tr.appendChild(el("td", null, str(D.a[k])));
    tr.appendChild(el("td", null, str(D.b[k])));
    $("sides").appendChild(tr);
  });
  (D.differences || []).forEach(function (d) {
    var where = (d.step !== undefined ? "step " + d.step + ", " : "") + (d.at !== undefined ? d.at + ", " : "");
    $("differences").appendChild(el("li", "bad", where + d.kind));
  });

  function side(s) {
    var td = el("td");
    if (!s) { td.appendChild(el("div", "bad", "(no such step)")); return td; }
    if (s.model_text) { td.appendChild(el("div", "label", "model")); td.appendChild(el("pre", null, s.model_text)); }
    (s.tool_calls || []).forEach(function (c) {
      td.appendChild(el("div", "label", "tool " + str(c.name) + (c.ok === false ? " (failed)" : "")));
      td.appendChild(el("pre", null, str(c.arguments)));
      td.appendChild(el("div", "label", "result"));
      td.appendChild(el("pre", null, str(c.result)));
    });
    td.appendChild(el("div", "measure", (s.tokens || 0) + " tokens · " + (s.duration_ms || 0) + " ms"));
    return td;
  }
  (D.steps || []).forEach(function (st) {
    var tr = el("tr", diffAt[st.n] ? "differs" : null);
    tr.appendChild(el("th", "n", "step " + st.n));
    tr.appendChild(side(st.a));
    tr.appendChild(side(st.b));
    $("steps").appendChild(tr);
  });
  (D.outputs || []).forEach(function (o) {
    var box = $("outputs");
    box.appendChild(el("div", o.same ? "label" : "label bad", "output " + o.path + (o.same ? " (the same)" : " (differs)")));
    if (o.diff) box.appendChild(el("pre", null, o.diff));
  });
  document.body.setAttribute("data-ready", "1");
})();
