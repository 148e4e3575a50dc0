// provrun view A B: two runs side by side, from the comparison in #compare-data. Every
// string in it came from a bundle: it only ever enters the page through textContent.
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("compare-data").textContent);
  function $(id) { return document.getElementById(id); }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
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
