/* The tinyattn backward explorer: steps through a recorded backward pass on Graphviz's SVG.

   The page holds the walk as JSON (tinyattn/explore.py): every node (op, formula, inputs, forward
   value) and every step (the node whose VJP ran, its g, the gradient it sent to each input, the
   explain line, the sums it made). The state of the page is one number, how many steps ran;
   everything drawn is a function of it, so stepping back is drawing the previous number.

   API, for tests and notebooks (window.tinyattn):
     steps          the number of steps (VJPs) in the walk
     step()         run the next step; back() undo one; reset() go to 0; finish() run them all
     goto(n)        show the state after n steps; state() the current number of steps run
                    (a node's panel has a "run to here" button: the steps until it is done)
     select(k)      show node k in the panel (#panel gets data-node="k")
     play(), pause()
     fnmatch(name, pattern)  whether a module path matches a collapse pattern, as Python's
                    fnmatch.fnmatchcase (the folds to_dot draws): * ? [seq] [!seq]
   Every node's box in the SVG carries data-node (its number), data-op (op name or "leaf") and
   data-state ("waiting" | "partial" | "done"); an op's ellipse carries data-vjp, data-op and
   data-state too. */
(function () {
  "use strict";
  const NS = "http://www.w3.org/2000/svg";
  const data = JSON.parse(document.getElementById("tinyattn-data").textContent);
  const nodes = data.nodes;
  const steps = data.steps;
  const svg = document.querySelector("#graph svg");
  const $ = (id) => document.getElementById(id);

  // ---- the walk as numbers --------------------------------------------------------------------

  const stepOf = nodes.map(() => -1); // node -> the step its VJP runs at (-1: never)
  steps.forEach((st, j) => { stepOf[st.node] = j; });
  // node -> the parts of its gradient, in the order they arrive: {step, user, input, norm,
  // shown} (shown: a one-element part's signed value, a bigger one's norm in ‖ ‖)
  const parts = nodes.map(() => []);
  if (nodes.length) parts[0].push({ step: -1, user: null, input: null, norm: "1", shown: steps.length ? steps[0].g.shown : "1" }); // the seed
  steps.forEach((st, j) => {
    nodes[st.node].inputs.forEach((inp, i) => {
      if (inp.parent !== null && st.grads[i] !== null) {
        parts[inp.parent].push({ step: j, user: st.node, input: i, norm: st.grads[i].norm, shown: st.grads[i].shown });
      }
    });
  });
  const sums = nodes.map(() => []); // node -> the "+=" sums so far, in order ({step, shape, shown})
  steps.forEach((st, j) => st.sums.forEach((e) => sums[e.node].push({ step: j, shape: e.shape, shown: e.shown })));

  function doneAt(k) { // the number of steps after which node k is done (null: never)
    if (nodes[k].op !== "leaf") return stepOf[k] >= 0 ? stepOf[k] + 1 : null;
    return parts[k].length ? Math.max(...parts[k].map((p) => p.step)) + 1 : null;
  }

  function arrived(k, s) {
    return parts[k].filter((p) => p.step < s).length;
  }

  function nodeState(k, s) {
    const got = arrived(k, s);
    const done = nodes[k].op === "leaf" ? got > 0 && got === parts[k].length
      : stepOf[k] >= 0 && stepOf[k] < s;
    return done ? "done" : got > 0 ? "partial" : "waiting";
  }

  // ---- the SVG: which element is which -----------------------------------------------------------

  const boxes = nodes.map(() => ({ tensor: null, op: null, badge: null }));
  for (const g of svg.querySelectorAll("g.node")) {
    const m = /^([tco])(\d+)/.exec(g.querySelector("title").textContent);
    if (!m) continue;
    const k = +m[2];
    if (m[1] === "c") { // a constant input: not a node of the graph, no gradient
      g.classList.add("const");
      continue;
    }
    const role = m[1] === "t" ? "tensor" : "op";
    boxes[k][role] = g;
    if (role === "tensor") g.dataset.node = k; else g.dataset.vjp = k;
    g.dataset.op = nodes[k].op;
    g.setAttribute("tabindex", "0");
    g.setAttribute("role", "button");
    g.addEventListener("click", (e) => { e.stopPropagation(); select(k); });
    g.addEventListener("keydown", (e) => {
      if (e.key === "Enter") { e.preventDefault(); select(k); }
    });
  }

  function textAt(parent, x, y, cls, anchor) {
    const t = document.createElementNS(NS, "text");
    t.setAttribute("x", x);
    t.setAttribute("y", y);
    t.setAttribute("class", cls);
    t.setAttribute("text-anchor", anchor || "start");
    parent.appendChild(t);
    return t;
  }

  for (const b of boxes) {
    if (!b.tensor) continue;
    const box = b.tensor.getBBox();
    b.badge = textAt(b.tensor, box.x + box.width + 2, box.y + 9, "badge");
  }

  // edges between an op's ellipse o<k> and a tensor box t<p>: p === k is g entering the op,
  // otherwise the gradient op k sends to its input p (x * x draws two edges: matched in order)
  const edges = [];
  const seen = {};
  for (const g of svg.querySelectorAll("g.edge")) {
    const ends = g.querySelector("title").textContent.split("->");
    const op = ends.find((e) => /^o\d+$/.test(e));
    const tensor = ends.find((e) => /^t\d+$/.test(e));
    if (!op || !tensor) continue; // a constant's dashed line
    const k = +op.slice(1);
    const p = +tensor.slice(1);
    let input = null;
    if (p !== k) {
      const j = seen[op + tensor] = (seen[op + tensor] ?? -1) + 1;
      input = nodes[k].inputs.map((inp, i) => [inp.parent, i]).filter(([q]) => q === p)[j][1];
    }
    const path = g.querySelector("path");
    const mid = path.getPointAtLength(path.getTotalLength() / 2);
    edges.push({ el: g, user: k, parent: p, input, label: textAt(g, mid.x + 5, mid.y + 3, "grad-label") });
  }

  function edgeGrad(e) { // the payload of the gradient an edge carries, or null
    const st = steps[stepOf[e.user]];
    const gr = e.input === null ? st.g : st.grads[e.input];
    return gr || null;
  }

  function edgeNorm(e) {
    const gr = edgeGrad(e);
    return gr ? gr.norm : null;
  }

  const logs = edges.filter((e) => stepOf[e.user] >= 0 && edgeNorm(e) !== null)
    .map((e) => Math.log10(Math.max(parseFloat(edgeNorm(e)), 1e-30)));
  const logLo = Math.min(...logs, 0);
  const logHi = Math.max(...logs, logLo + 1);

  // ---- collapse patterns: Python's fnmatch ------------------------------------------------------

  // A pattern as the regular expression CPython's fnmatch.translate makes of it, step for step
  // (so the page folds exactly what to_dot folds): * any run, ? one character, [seq] one of
  // seq (ranges a-z, a ] first is in the set), [!seq] one not in it, a [ with no ] itself; no
  // escaping. Indexes count code points, as Python's do; the "u" flag matches them so.
  const STAR = {};

  function globSource(pattern) {
    const p = [...pattern];
    const n = p.length;
    const text = (a, b) => p.slice(a, b).join("");
    const literal = (c) => c.replace(/[\\^$.*+?()[\]{}|/]/g, "\\$&");
    const inSet = (c) => c.replace(/[\\\]]/g, "\\$&"); // (Python's `[]]`: JS reads `[]` as empty)
    const res = [];
    let i = 0;
    while (i < n) {
      const c = p[i++];
      if (c === "*") {
        if (res[res.length - 1] !== STAR) res.push(STAR);
      } else if (c === "?") {
        res.push(".");
      } else if (c === "[") {
        let j = i;
        if (j < n && p[j] === "!") j++;
        if (j < n && p[j] === "]") j++;
        while (j < n && p[j] !== "]") j++;
        if (j >= n) {
          res.push("\\[");
          continue;
        }
        let stuff;
        if (!p.slice(i, j).includes("-")) {
          stuff = inSet(text(i, j));
        } else {
          const chunks = [];
          let k = p[i] === "!" ? i + 2 : i + 1;
          for (;;) {
            k = p.indexOf("-", k);
            if (k < 0 || k >= j) break;
            chunks.push(text(i, k));
            i = k + 1;
            k += 3;
          }
          const chunk = text(i, j);
          if (chunk) chunks.push(chunk); else chunks[chunks.length - 1] += "-";
          for (let m = chunks.length - 1; m > 0; m--) { // an empty range (z-a) goes
            const a = [...chunks[m - 1]];
            const b = [...chunks[m]];
            if (a[a.length - 1].codePointAt(0) > b[0].codePointAt(0)) {
              chunks[m - 1] = a.slice(0, -1).join("") + b.slice(1).join("");
              chunks.splice(m, 1);
            }
          }
          stuff = chunks.map((s) => inSet(s).replace(/-/g, "\\-")).join("-");
        }
        i = j + 1;
        if (!stuff) res.push("(?!)"); // an empty set: never matches
        else if (stuff === "!") res.push("."); // a negated empty set: any character
        else {
          if (stuff[0] === "!") stuff = "^" + stuff.slice(1);
          else if (stuff[0] === "^" || stuff[0] === "[") stuff = "\\" + stuff;
          res.push(`[${stuff}]`);
        }
      } else {
        res.push(literal(c));
      }
    }
    return res.map((r) => (r === STAR ? ".*" : r)).join("");
  }

  function glob(pattern) {
    return new RegExp(`^(?:${globSource(pattern)})$`, "su");
  }

  const fnmatch = (name, pattern) => glob(pattern).test(name);

  // ---- module clusters: click to fold ---------------------------------------------------------

  const layer = svg.querySelector("g.graph") || svg;
  const clusters = [...layer.querySelectorAll(":scope > g.cluster")].map((el) => {
    const path = el.querySelector("title").textContent.replace(/^cluster_/, "");
    const inside = (place) => place !== null && (place === path || place.startsWith(path + "."));
    const members = nodes.filter((n) => inside(n.place)).map((n) => n.k);
    const box = el.getBBox();
    const summary = textAt(el, box.x + box.width / 2, box.y + Math.min(box.height / 2, 60), "summary", "middle");
    summary.style.fontSize = `${Math.max(12, Math.min(box.width / 14, 40))}px`;
    el.setAttribute("tabindex", "0");
    el.setAttribute("role", "button");
    el.setAttribute("aria-label", "fold or open module " + path);
    return { el, path, members, summary, collapsed: false };
  });
  const anchor = clusters.length ? clusters[clusters.length - 1].el.nextSibling : null;
  const folded = (data.collapse || []).map(glob);
  for (const c of clusters) {
    c.collapsed = folded.some((re) => re.test(c.path));
    const toggle = (e) => { e.stopPropagation(); c.collapsed = !c.collapsed; render(); };
    c.el.addEventListener("click", toggle);
    c.el.addEventListener("keydown", (e) => { if (e.key === "Enter") toggle(e); });
  }

  function drawClusters() {
    for (const c of clusters) { // back in place, in their first order, under the nodes
      layer.insertBefore(c.el, anchor);
    }
    for (const c of clusters) {
      const hidden = clusters.some((o) => o.collapsed && o !== c && c.path.startsWith(o.path + "."));
      const on = c.collapsed && !hidden;
      c.el.classList.toggle("collapsed", on);
      const states = c.members.map((k) => nodeState(k, cur));
      const n = (s) => states.filter((x) => x === s).length;
      c.el.dataset.state = n("done") === states.length && states.length ? "done"
        : n("done") + n("partial") ? "partial" : "waiting";
      c.summary.textContent = on ? `${c.path}: ${n("done")} of ${c.members.length} done, ${n("partial")} arriving` : "";
      if (on) layer.appendChild(c.el); // folded: on top, covering its members
    }
  }

  // ---- state and drawing ------------------------------------------------------------------------

  let cur = 0; // steps run
  let selected = null;
  let timer = null;

  function badgeText(k, state) {
    const got = arrived(k, cur);
    const want = parts[k].length;
    if (state === "done") return nodes[k].op === "leaf" ? "✓" : `✓ ${stepOf[k]}`;
    if (state === "partial") return got < want ? `+= ${got}/${want}` : want > 1 ? `Σ ${want} parts` : "ready";
    return "";
  }

  function render() {
    const next = cur < steps.length ? steps[cur].node : null;
    nodes.forEach((n, k) => {
      const state = nodeState(k, cur);
      for (const el of [boxes[k].tensor, boxes[k].op]) {
        if (!el) continue;
        el.dataset.state = state;
        el.classList.toggle("next", k === next);
        el.classList.toggle("selected", k === selected);
        el.setAttribute("aria-label", `${n.op}${n.name ? " " + n.name : ""}${n.scope ? " [" + n.scope + "]" : ""}: ${state}`);
      }
      if (boxes[k].badge) boxes[k].badge.textContent = badgeText(k, state);
    });
    for (const e of edges) {
      const ran = stepOf[e.user] >= 0 && stepOf[e.user] < cur;
      const value = ran ? edgeNorm(e) : null;
      e.el.classList.toggle("carried", value !== null);
      e.el.classList.toggle("just", value !== null && stepOf[e.user] === cur - 1);
      const fan = e.input !== null && parts[e.parent].length > 1;
      e.label.textContent = value === null ? "" : `${fan ? "+= " : ""}${edgeGrad(e).shown}`;
      const w = value === null ? 1 : 1.2 + 3 * (Math.log10(Math.max(parseFloat(value), 1e-30)) - logLo) / (logHi - logLo);
      e.el.querySelector("path").style.strokeWidth = w;
    }
    drawClusters();
    $("counter").textContent = `step ${cur} of ${steps.length}` +
      (next !== null ? ` · next: ${nodes[next].op}${nodes[next].scope ? " [" + nodes[next].scope + "]" : ""}` : " · done");
    $("jump").value = cur > 0 ? String(cur - 1) : "";
    $("back").disabled = cur === 0;
    $("reset").disabled = cur === 0;
    $("step").disabled = cur === steps.length;
    panel();
  }

  function goto(s) {
    cur = Math.max(0, Math.min(steps.length, s | 0));
    if ($("follow").checked) selected = cur > 0 ? steps[cur - 1].node : nodes.length ? 0 : null;
    render();
    const el = selected !== null && boxes[selected].tensor;
    if (el && $("follow").checked) el.scrollIntoView({ block: "nearest", inline: "nearest" });
    return cur;
  }

  function select(k) {
    selected = k;
    render();
    return k;
  }

  // ---- the panel ----------------------------------------------------------------------------------

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [key, v] of Object.entries(attrs || {})) {
      if (v !== null && v !== undefined) e.setAttribute(key, v);
    }
    for (const c of children) if (c !== null && c !== undefined) e.append(c);
    return e;
  }

  const shape = (s) => s === null ? "(absent)" : "(" + s.join(", ") + (s.length === 1 ? ",)" : ")");

  function link(k) {
    const n = nodes[k];
    const a = el("a", { class: "node-link", tabindex: "0" }, n.name || (n.op === "leaf" ? "leaf" : n.op) + ` #${k}`);
    a.addEventListener("click", () => select(k));
    a.addEventListener("keydown", (e) => { if (e.key === "Enter") select(k); });
    return a;
  }

  const DIVERGING = ["#b35806", "#e08214", "#fdb863", "#fee0b6", "#f7f7f7", "#d8daeb", "#b2abd2", "#8073ac", "#542788"];
  const SEQUENTIAL = ["#440154", "#482878", "#3e4989", "#31688e", "#26828e", "#1f9e89", "#35b779", "#6ece58", "#b5de2b", "#fde725"];

  function colour(stops, t) {
    const x = t * (stops.length - 1);
    const i = Math.min(Math.floor(x), stops.length - 2);
    const f = x - i;
    const rgb = (h) => [1, 3, 5].map((o) => parseInt(h.slice(o, o + 2), 16));
    const a = rgb(stops[i]);
    const b = rgb(stops[i + 1]);
    return `rgb(${a.map((v, c) => Math.round(v + (b[c] - v) * f)).join(",")})`;
  }

  function heatmap(h) {
    const cells = Uint8Array.from(atob(h.cells), (c) => c.charCodeAt(0));
    const size = Math.max(3, Math.min(14, Math.floor(380 / h.cols)));
    const canvas = el("canvas", { width: h.cols * size, height: h.rows * size,
      "aria-label": `heatmap of ${h.rows} by ${h.cols} values` });
    const ctx = canvas.getContext("2d");
    const stops = h.signed ? DIVERGING : SEQUENTIAL;
    const decode = (code) => h.lo + (code / 254) * (h.hi - h.lo);
    cells.forEach((code, i) => {
      ctx.fillStyle = code === 255 ? "#7f7f7f" : colour(stops, code / 254);
      ctx.fillRect((i % h.cols) * size, Math.floor(i / h.cols) * size, size, size);
    });
    const cell = el("div", { class: "cell" }, "hover a cell for its value");
    canvas.addEventListener("mousemove", (e) => {
      const r = Math.floor(e.offsetY / size);
      const c = Math.floor(e.offsetX / size);
      const code = cells[r * h.cols + c];
      if (code === undefined) return;
      cell.textContent = `[${r}, ${c}] ` + (code === 255 ? "not finite" : `≈ ${decode(code).toPrecision(3)}`);
    });
    const crop = h.rows < h.of[0] || h.cols < h.of[1] ? ` (first ${h.rows} × ${h.cols} of ${h.of[0]} × ${h.of[1]})` : "";
    const scale = h.lo === h.hi ? `every value ${h.lo.toPrecision(3)}` : h.signed ? `${h.lo.toPrecision(3)} orange … 0 white … ${h.hi.toPrecision(3)} purple`
      : `${h.lo.toPrecision(3)} dark … ${h.hi.toPrecision(3)} yellow`;
    return el("div", {}, el("div", { class: "meta" }, `slice ${h.slice}${crop}: ${scale}; grey: not finite`), canvas, cell);
  }

  function value(p, field) {
    const meta = el("div", { class: "meta" }, `${shape(p.shape)} ${p.dtype}`);
    if (p.norm !== undefined) meta.append(" · norm ", el("span", { "data-field": field || null }, p.norm));
    const out = el("div", { class: "value" }, meta);
    if (p.text !== undefined) out.append(el("pre", {}, p.text));
    if (p.stats) {
      const s = p.stats;
      const text = s.true !== undefined ? `${s.true} True`
        : s.mean !== undefined ? `mean ${s.mean}  std ${s.std}  min ${s.min}  max ${s.max}` : "";
      out.append(el("div", { class: "stats" }, text + (s.nonfinite ? `  (${s.nonfinite} not finite: -inf is a masked entry)` : "")));
    }
    if (p.heat) out.append(heatmap(p.heat));
    return out;
  }

  function header(n) {
    const title = n.op === "leaf" ? "leaf" : n.op + (n.fused ? " (fused)" : "");
    const kind = { root: "the loss (backward starts here)", param: "parameter", input: "input that requires grad", value: "intermediate value" }[n.kind];
    return [el("h2", { "data-field": "op" }, title + (n.name ? ` — ${n.name}` : "")),
      el("div", { class: "where" }, kind + (n.scope ? ` · in ${n.scope}` : "") + (data.types[n.scope] ? ` (${data.types[n.scope]})` : ""))];
  }

  function opSection(n) {
    const rows = n.inputs.map((inp, i) => el("tr", {},
      el("td", {}, n.grads[i]),
      el("td", {}, inp.parent === null ? "constant" : link(inp.parent)),
      el("td", {}, `${shape(inp.shape)}${inp.dtype ? " " + inp.dtype : ""}`)));
    const params = Object.entries(n.params).map(([key, v]) => `${key}=${v}`).join(", ");
    return [el("h3", {}, "VJP"), el("code", { class: "formula", "data-field": "formula" }, n.formula),
      n.doc ? el("div", { class: "meta" }, "forward: ", el("code", {}, n.doc)) : null,
      params ? el("div", { class: "meta" }, "parameters: ", el("code", {}, params)) : null,
      el("h3", {}, "inputs"), el("table", {}, el("tr", {}, el("th", {}, "gradient"), el("th", {}, "from"), el("th", {}, "shape")), ...rows)];
  }

  function partsList(k) {
    const got = parts[k].filter((p) => p.step < cur);
    if (parts[k].length < 2 || !got.length) return null;
    return el("ul", { class: "parts", "data-field": "parts" }, ...got.map((p, m) => {
      const from = p.user === null ? el("span", {}, "the seed: d loss / d loss = 1") : el("span", {}, "from ", link(p.user), ` (step ${p.step})`);
      const sum = m > 0 && sums[k][m - 1] ? ` — sum so far ${shape(sums[k][m - 1].shape)} ${sums[k][m - 1].shown}` : "";
      return el("li", {}, `${m ? "+=" : "="} ${p.shown} `, from, sum);
    }));
  }

  function backwardSection(k, state) {
    const n = nodes[k];
    const got = arrived(k, cur);
    const want = parts[k].length;
    const words = state === "done" ? (n.op === "leaf" ? "done: its whole gradient has arrived" : `done: its VJP ran at step ${stepOf[k]}`)
      : state === "partial" ? (got < want ? `gradient arriving: ${got} of ${want} parts` : "its gradient is complete; its VJP runs next")
      : want ? "waiting: no gradient has reached it yet" : "no gradient reaches it";
    const out = [el("h3", {}, "backward"), el("div", {}, el("span", { class: `state ${state}`, "data-field": "state" }, state), " ", words), partsList(k)];
    const at = doneAt(k);
    if (at !== null && at !== cur) {
      const run = el("button", { type: "button", "data-action": "run-to" }, at > cur ? `run to here (step ${at})` : `back to step ${at}`);
      run.addEventListener("click", () => { goto(at); select(k); });
      out.push(el("div", {}, run));
    }
    if (state !== "done") return out;
    const after = n.hooks ? (n.hooks.ran ? ", after its hooks" : ", its hooks not run") : "";
    if (n.op === "leaf") return out.concat([el("div", {}, `its gradient (.grad${after}):`), n.total ? value(n.total, "g-norm") : null, ...hooksSection(n)]);
    const st = steps[stepOf[k]];
    out.push(el("div", {}, `g, the gradient of its output${after}:`), value(st.g, "g-norm"), ...hooksSection(n));
    st.grads.forEach((gr, i) => {
      if (gr) out.push(el("div", {}, `${n.grads[i]}, sent to `, n.inputs[i].parent === null ? "a constant" : link(n.inputs[i].parent), ":"), value(gr, `grad-norm-${i}`));
    });
    out.push(el("div", { class: "meta" }, "explain mode says:"), el("pre", { class: "explain", "data-field": "explain" }, st.explain));
    return out;
  }

  function hooksSection(n) { // what the node's hooks (register_hook) did to its gradient
    const h = n.hooks;
    if (!h) return [];
    const count = h.count === 1 ? "its hook" : `its ${h.count} hooks`;
    const words = h.ran ? `${count} (register_hook) ran on the sum of its parts, as backward runs them; the sum before them:`
      : `${count} (register_hook) did not run here (the page was made with hooks=False): these are the numbers before them, and backward's will differ`;
    return [el("div", { class: "meta", "data-field": "hooks" }, words), h.ran && h.before ? value(h.before, "before-hooks-norm") : null];
  }

  function panel() {
    const p = $("panel");
    if (selected === null) return;
    const n = nodes[selected];
    const state = nodeState(selected, cur);
    p.dataset.node = selected;
    p.dataset.state = state;
    const forward = n.value ? value(n.value, "value-norm") : null;
    const note = n.value_note || (n.value ? null : "not recorded: run the forward pass inside `with viz.record() as rec:` and pass recording=rec");
    const parts = [...header(n), ...(n.op === "leaf" ? [] : opSection(n)),
      el("h3", {}, "forward value"), forward, note ? el("div", { class: "meta", "data-field": "value-note" }, note) : null,
      ...backwardSection(selected, state)];
    p.replaceChildren(...parts.filter((x) => x !== null));
  }

  // ---- controls ------------------------------------------------------------------------------------

  const step = () => goto(cur + 1);
  const back = () => goto(cur - 1);
  const reset = () => goto(0);
  const finish = () => goto(steps.length);

  function pause() {
    clearInterval(timer);
    timer = null;
    $("play").textContent = "▶ play";
    $("play").setAttribute("aria-pressed", "false");
  }

  function play() {
    pause();
    if (cur >= steps.length) goto(0);
    timer = setInterval(() => { if (cur >= steps.length) pause(); else step(); }, 1000 / parseFloat($("speed").value));
    $("play").textContent = "⏸ pause";
    $("play").setAttribute("aria-pressed", "true");
  }

  const toggle = () => (timer ? pause() : play());

  let zoom = 1;
  const width = parseFloat(svg.getAttribute("width"));
  const height = parseFloat(svg.getAttribute("height"));

  function setZoom(z) {
    zoom = Math.max(0.1, Math.min(4, z));
    svg.setAttribute("width", `${width * zoom}pt`);
    svg.setAttribute("height", `${height * zoom}pt`);
  }

  const fit = () => setZoom(($("graph").clientWidth - 20) / (width * 4 / 3));

  $("step").addEventListener("click", step);
  $("back").addEventListener("click", back);
  $("reset").addEventListener("click", reset);
  $("play").addEventListener("click", toggle);
  $("speed").addEventListener("input", () => {
    $("speed-value").textContent = $("speed").value;
    if (timer) play();
  });
  $("zoom-in").addEventListener("click", () => setZoom(zoom * 1.25));
  $("zoom-out").addEventListener("click", () => setZoom(zoom / 1.25));
  $("zoom-fit").addEventListener("click", fit);
  const jump = $("jump");
  jump.append(el("option", { value: "" }, "(a step)"),
    ...steps.map((st, j) => el("option", { value: j }, `[${j}] ${nodes[st.node].op}${nodes[st.node].scope ? " [" + nodes[st.node].scope + "]" : ""}`)));
  jump.addEventListener("change", () => { if (jump.value !== "") { goto(+jump.value + 1); select(steps[+jump.value].node); } });

  document.addEventListener("keydown", (e) => {
    if (e.altKey || e.ctrlKey || e.metaKey || e.target.closest("input, select, textarea")) return;
    if (e.target.closest("button") && (e.key === " " || e.key === "Enter")) return; // the button's own click
    const act = { ArrowRight: step, ArrowDown: step, ArrowLeft: back, ArrowUp: back, " ": toggle,
      Home: reset, End: finish, "+": () => setZoom(zoom * 1.25), "=": () => setZoom(zoom * 1.25),
      "-": () => setZoom(zoom / 1.25) }[e.key];
    if (act) { e.preventDefault(); act(); }
  });

  window.tinyattn = { steps: steps.length, data, step, back, reset, finish, goto, select, play, pause,
    state: () => cur, fnmatch };
  if ($("graph").clientWidth < width * 4 / 3) { // wider than the window: fit, but stay readable
    fit();
    setZoom(Math.max(zoom, 0.8));
  }
  goto(0);
})();
