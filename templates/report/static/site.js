/* azbench report site: draws the embedded plotly specs, sorts and filters tables, lets the
   systems key hide a system's traces, and fills the compare view (its choice kept in the URL).
   No network: plotly.js is loaded from ../assets next to this file. */
(function () {
  "use strict";
  var figures = JSON.parse(document.getElementById("figures").textContent || "{}");
  var config = { displaylogo: false, responsive: true, scrollZoom: false,
                 modeBarButtonsToRemove: ["lasso2d", "select2d", "autoScale2d", "toggleSpikelines"] };
  var hidden = {};  // system label -> true while the systems key hides it

  function applyHidden(el) {
    if (!el.data) return;
    var idx = [], vis = [];
    el.data.forEach(function (t, i) {
      if (t.meta !== undefined && t.meta !== null) { idx.push(i); vis.push(!hidden[t.meta]); }
    });
    if (idx.length) Plotly.restyle(el, { visible: vis }, idx);
  }

  // A phone (the CSS breakpoint): the legend right of the plot would take half its width, so
  // it goes under the plot, and the right margin it needed is given back to the plot.
  var narrow = window.matchMedia("(max-width: 700px)");
  function fitted(layout) {
    if (!narrow.matches || !layout.showlegend || !layout.legend || !(layout.legend.x >= 1)) return layout;
    var out = Object.assign({}, layout);
    out.legend = Object.assign({}, layout.legend, { orientation: "h", x: 0, xanchor: "left",
                                                    yref: "container", y: 0, yanchor: "bottom" });
    out.margin = Object.assign({}, layout.margin, { r: 10, b: (layout.margin.b || 50) + 90 });
    out.height = (layout.height || 380) + 90;
    return out;
  }

  // A title longer than its chart is wide wraps at spaces (plotly never wraps one: a phone cut
  // it); the top margin grows by a line for each line added.
  function wrapTitle(layout, px) {
    var title = layout.title, text = title && (typeof title === "string" ? title : title.text);
    if (!text || !px) return layout;
    var size = (title.font && title.font.size) || (layout.font && layout.font.size) || 14;
    var room = Math.max(12, Math.floor((px - 70) / (0.56 * size * 1.2)));
    var lines = [];
    text.split(/<br\s*\/?>/i).forEach(function (part) {
      var line = "";
      part.split(" ").forEach(function (word) {
        if (line && (line + " " + word).replace(/<[^>]*>/g, "").length > room) { lines.push(line); line = word; }
        else line = line ? line + " " + word : word;
      });
      lines.push(line);
    });
    var before = text.split(/<br\s*\/?>/i).length;
    if (lines.length === before) return layout;
    var out = Object.assign({}, layout);
    out.title = Object.assign({}, typeof title === "string" ? {} : title, { text: lines.join("<br>") });
    var extra = Math.ceil((lines.length - before) * size * 1.3);
    out.margin = Object.assign({}, layout.margin, { t: ((layout.margin && layout.margin.t) || 80) + extra });
    out.height = (layout.height || 380) + extra;
    return out;
  }

  function draw(el) {
    if (el.dataset.drawn || !el.dataset.fig) return;
    var fig = figures[el.dataset.fig];
    if (!fig || typeof Plotly === "undefined") { el.textContent = "chart unavailable"; return; }
    el.dataset.drawn = "1";
    Plotly.newPlot(el, fig.data, wrapTitle(fitted(fig.layout), el.clientWidth), config).then(function () {
      applyHidden(el);
      el.dataset.rendered = "1";
    });
  }
  // -- the forecast: "what would N nodes give?" computes what orchestrator.forecast.curve.evaluate
  // computes, from each curve's parameters embedded in the page (#forecast-data; nothing fetched),
  // and checks a node count, prices it and refuses past max_extrapolation as `azbench plan` does.
  var forecast = (function () {
    var el = document.getElementById("forecast-data");
    var curves = el ? JSON.parse(el.textContent || "{}") : {};

    // (predicted, low, high) minutes at `gpus`: curve.evaluate's arithmetic, step by step
    function evaluate(b, gpus) {
      var a0 = b.coefficients[0], a1 = b.coefficients[1], a2 = b.coefficients[2];
      var u = Math.log2(gpus);
      var e = Math.min(Math.max(u, Math.log2(b.low_gpus)), Math.log2(b.high_gpus));
      var turn = b.vertex_log2_gpus;
      var v = (turn === null || turn === undefined) ? e : (a2 > 0 ? Math.min(e, turn) : Math.max(e, turn));
      var x = v - b.center_log2_gpus;
      var slope = v !== e ? 0.0 : Math.min(a1 + 2.0 * a2 * x, 0.0);
      var offset = Object.prototype.hasOwnProperty.call(b.offsets, b.level) ? b.offsets[b.level] : 0.0;
      var centre = a0 + a1 * x + a2 * x * x + offset + slope * (u - e);
      // the doublings to the nearest measured count (Fit.distance), inside the data too
      var near = Math.abs(u - e);
      if (b.measured_gpus && b.measured_gpus.length) {
        near = Math.min.apply(null, b.measured_gpus.map(function (g) { return Math.abs(u - Math.log2(g)); }));
      }
      var within = b.interval.half_width_ln * (1.0 + b.interval.widen_per_doubling * near);
      var r = b.interval.new_round_ln || 0.0;
      var h = within + r;  // forward.combined: a new round's shift adds to the curve's error
      return [Math.exp(centre), Math.exp(centre - h), Math.exp(centre + h)];
    }
    // how far past the measured counts, as Fit.extrapolation: 2 ** doublings outside (1 inside)
    function extrapolation(b, gpus) {
      var u = Math.log2(gpus);
      return Math.pow(2.0, Math.max(0.0, u - Math.log2(b.high_gpus), Math.log2(b.low_gpus) - u));
    }
    // Python's format(v, ",.Nf"): the exact value rounded half to even, thousands with commas
    function fixed(v, d) {
      var s = v.toFixed(d), exact = v.toFixed(100), dot = exact.indexOf(".");
      if (/^50*$/.test(exact.slice(dot + 1 + d))) {  // an exact tie: toFixed rounds it up
        var cut = exact.slice(0, d ? dot + 1 + d : dot);
        if (Number(cut.charAt(cut.length - 1)) % 2 === 0) s = cut;
      }
      var parts = s.split(".");
      parts[0] = parts[0].replace(/\B(?=(\d{3})+(?!\d))/g, ",");
      return parts.join(".");
    }
    function count(n) { return fixed(n, 0); }
    function nodesOk(c, nodes) {  // forecast.plan.check_nodes: whole racks on GB200, or one partial rack
      var steps = c.node_steps;
      return steps.length === 1 && steps[0] === 1 || nodes < steps[0] ||
        steps.some(function (s) { return nodes % s === 0; });
    }
    function standsOn(b, gpus) {  // forecast.plan._stands_on
      var scales = b.measured_gpus;
      if (scales.indexOf(gpus) >= 0) return count(gpus) + " GPUs measured";
      if (gpus > b.high_gpus) return fixed(gpus / b.high_gpus, 1) + "x past " + count(b.high_gpus) + " GPUs";
      if (gpus < b.low_gpus) return fixed(b.low_gpus / gpus, 1) + "x below " + count(b.low_gpus) + " GPUs";
      var below = Math.max.apply(null, scales.filter(function (s) { return s < gpus; }));
      var above = Math.min.apply(null, scales.filter(function (s) { return s > gpus; }));
      return "between " + count(below) + " and " + count(above) + " GPUs";
    }
    function racks(c, nodes) {
      var rack = c.node_steps[0];
      if (rack <= 1) return "";
      var per = c.node_steps.filter(function (s) { return nodes % s === 0; })[0];
      return per ? ", " + count(nodes / per) + (nodes / per === 1 ? " rack of " : " racks of ") + per + " VMs"
        : ", one rack of " + nodes + " VMs (" + (rack - nodes) + " of " + rack + " slots free)";
    }
    // the answer for `nodes` (a number) on curve `c`: what the page shows, and the numbers
    function answer(c, nodes) {
      var b = c.basis;
      if (!Number.isInteger(nodes)) return { state: "invalid", text: "type a whole number of nodes" };
      if (nodes < 1) return { state: "invalid", text: "node counts must be at least 1, got " + nodes };
      if (!nodesOk(c, nodes)) {
        return { state: "invalid", text: nodes + " nodes: " + c.sku_short + " comes in NVL72 racks of " +
                 c.node_steps[0] + " VMs: " + nodes + " nodes is not a whole number of racks; use a multiple of " +
                 c.node_steps.join(" or of ") };
      }
      var gpus = nodes * c.gpus_per_node;
      if (!(extrapolation(b, gpus) <= b.max_extrapolation * (1 + 1e-9))) {
        var where = gpus > b.high_gpus
          ? fixed(gpus / b.high_gpus, 1) + "x the largest measured scale (" + count(b.high_gpus) + " GPUs)"
          : fixed(b.low_gpus / gpus, 1) + "x below the smallest measured scale (" + count(b.low_gpus) + " GPUs)";
        return { state: "refused", gpus: gpus,
                 text: nodes + " nodes: " + count(gpus) + " GPUs is " + where + " of " + c.benchmark + " on " +
                       c.sku_short + "; predictions stop at " + String(b.max_extrapolation) + "x" };
      }
      var t = evaluate(b, gpus);
      var r = { state: "ok", gpus: gpus, minutes: t[0], low: t[1], high: t[2],
                text: fixed(t[0], 2) + " min [" + fixed(t[1], 2) + "-" + fixed(t[2], 2) + "], 80% interval, on " +
                      count(nodes) + " nodes = " + count(gpus) + " GPUs" + racks(c, nodes) + " (" + standsOn(b, gpus) + ")" };
      var price = c.price_per_vm_hour_usd;
      if (price === null || price === undefined) {
        r.cost = "cost per result: unknown (the catalog has no list price for " + c.sku_short + ")";
      } else {
        var perHour = nodes * price;
        // each run at its predicted wall time: the score / the nearest measured score's RCP factor
        var factor = 1.0, far = Infinity;
        (c.scaling || []).forEach(function (p) {
          var d = Math.abs(Math.log(p.gpus / gpus));
          if (d < far) { far = d; factor = p.factor; }
        });
        var cost = t.map(function (m) { return c.runs_required * (m / factor) / 60.0 * perHour; });
        r.cost_usd = cost[0]; r.cost_low_usd = cost[1]; r.cost_high_usd = cost[2];
        r.cost = "cost per result: $" + fixed(cost[0], 0) + " [$" + fixed(cost[1], 0) + "-$" + fixed(cost[2], 0) +
                 "] (" + c.runs_required + " runs x predicted minutes / RCP scaling " + fixed(factor, 4) + " x " +
                 count(nodes) + " nodes x $" + fixed(price, 2) + " per VM-hour, list price)";
      }
      return r;
    }
    function show(box) {
      var c = curves[box.dataset.gpu], input = box.querySelector(".forecast-nodes");
      var out = box.querySelector(".forecast-answer");
      if (!c || !input || !out) return;
      var raw = input.value.trim();
      var r = answer(c, raw === "" ? NaN : Number(raw));
      out.dataset.state = r.state;
      ["minutes", "low", "high", "cost_usd", "cost_low_usd", "cost_high_usd", "gpus"].forEach(function (k) {
        if (r[k] === undefined) delete out.dataset[k]; else out.dataset[k] = String(r[k]);
      });
      out.textContent = "";
      var line = document.createElement(r.state === "ok" ? "b" : "span");
      line.textContent = r.text;
      out.appendChild(line);
      if (r.cost) { out.appendChild(document.createElement("br")); out.appendChild(document.createTextNode(r.cost)); }
      var chart = box.querySelector(".chart[data-fig]"), fig = chart && figures[chart.dataset.fig];
      if (!fig) return;
      var shapes = r.state === "ok" ? [{ type: "line", xref: "x", yref: "paper", x0: r.gpus, x1: r.gpus, y0: 0, y1: 1,
                                         line: { color: "#555555", width: 1, dash: "dash" } }] : [];
      fig.layout.shapes = shapes;
      if (chart.dataset.rendered && typeof Plotly !== "undefined") Plotly.relayout(chart, { shapes: shapes });
    }
    document.querySelectorAll("section.forecast").forEach(function (box) {
      var input = box.querySelector(".forecast-nodes");
      if (input) input.addEventListener("input", function () { show(box); });
      show(box);
    });
    return { curves: curves, evaluate: evaluate, extrapolation: extrapolation, answer: answer, fixed: fixed };
  })();
  window.azbenchForecast = forecast;

  // A phone folds the index's sections below best-per-benchmark (details.fold, open on a wide
  // screen); charts in a closed <details> are drawn when it opens, at the width it gives them.
  if (narrow.matches) document.querySelectorAll("details.fold").forEach(function (d) { d.open = false; });
  document.querySelectorAll(".chart[data-fig]").forEach(function (el) {
    if ((!el.classList.contains("lazy") || el.closest("details[open]"))
        && !el.closest("details:not([open])")) draw(el);
  });
  // charts inside a closed <details> (a run's drill-down) are drawn when it opens
  document.querySelectorAll("details").forEach(function (d) {
    d.addEventListener("toggle", function () {
      if (d.open) d.querySelectorAll(".chart[data-fig]").forEach(draw);
    });
  });
  if (location.hash) {
    var target = document.getElementById(location.hash.slice(1));
    if (target && target.tagName === "DETAILS") { target.open = true; }
  }
  document.querySelectorAll('a[href^="#"]').forEach(function (a) {
    a.addEventListener("click", function () {
      var t = document.getElementById(a.getAttribute("href").slice(1));
      if (t && t.tagName === "DETAILS") t.open = true;
    });
  });

  // -- the systems key: a click on a system's colour hides (or shows) it on every chart here
  document.querySelectorAll("#systems-key td[data-system] .swatch").forEach(function (sw) {
    sw.title = "hide or show this system on the charts";
    sw.addEventListener("click", function () {
      var label = sw.parentNode.dataset.system;
      hidden[label] = !hidden[label];
      sw.parentNode.parentNode.classList.toggle("off", !!hidden[label]);
      document.querySelectorAll(".chart[data-rendered]").forEach(applyHidden);
    });
  });

  // -- sortable tables: click a header; numbers (data-sort) sort as numbers, blanks last
  function key(td) {
    if (!td) return null;
    var s = td.getAttribute("data-sort");
    if (s === null) return td.textContent.trim().toLowerCase();
    var n = parseFloat(s);
    return isNaN(n) ? s.toLowerCase() : n;
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    table.querySelectorAll("th").forEach(function (th, col) {
      th.addEventListener("click", function () {
        var asc = !th.classList.contains("asc");
        table.querySelectorAll("th").forEach(function (h) { h.classList.remove("asc", "desc"); });
        th.classList.add(asc ? "asc" : "desc");
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = key(a.cells[col]), y = key(b.cells[col]);
          if (x === y) return 0;
          if (x === null || x === "-") return 1;
          if (y === null || y === "-") return -1;
          if (typeof x !== typeof y) { x = String(x); y = String(y); }
          return (x < y ? -1 : 1) * (asc ? 1 : -1);
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  });

  // -- filters: rows (or history charts) whose text does not contain every typed word hide
  function matches(text, query) {
    text = text.toLowerCase();
    return query.toLowerCase().split(/\s+/).every(function (w) { return !w || text.indexOf(w) >= 0; });
  }
  document.querySelectorAll("input.filter").forEach(function (input) {
    input.addEventListener("input", function () {
      var table = document.getElementById(input.dataset.table);
      var shown = 0;
      Array.prototype.forEach.call(table.tBodies[0].rows, function (r) {
        var ok = matches(r.textContent, input.value);
        r.classList.toggle("hidden", !ok);
        if (ok) shown++;
      });
      var count = document.querySelector('[data-count="' + input.dataset.table + '"]');
      if (count) count.textContent = shown + " of " + table.tBodies[0].rows.length + " rows";
    });
  });
  document.querySelectorAll("input.filter-charts").forEach(function (input) {
    input.addEventListener("input", function () {
      document.querySelectorAll(".chart-box").forEach(function (box) {
        box.classList.toggle("hidden", !matches(box.dataset.label || "", input.value));
      });
    });
  });

  // -- compare: two systems or two runs, delta = (B - A) / A; the choice lives in the URL hash
  var data = document.getElementById("compare-data");
  if (!data) return;
  data = JSON.parse(data.textContent);
  var state = {};
  (location.hash.slice(1) || "").split("&").forEach(function (kv) {
    var i = kv.indexOf("=");
    if (i > 0) state[decodeURIComponent(kv.slice(0, i))] = decodeURIComponent(kv.slice(i + 1));
  });
  function saveState() {
    var h = "#" + Object.keys(state).map(function (k) {
      return encodeURIComponent(k) + "=" + encodeURIComponent(state[k]);
    }).join("&");
    try { history.replaceState(null, "", h); } catch (e) { location.hash = h; }
  }
  function fmt(v) {
    if (v === null || v === undefined) return "-";
    if (Number.isInteger(v)) return v.toLocaleString("en-US");
    return Math.abs(v) >= 100 ? v.toLocaleString("en-US", { maximumFractionDigits: 1 })
      : Number(v.toPrecision(4)).toString();
  }
  function shortName(s) { return s.length > 64 ? s.slice(0, 42) + "…" + s.slice(-21) : s; }
  document.querySelectorAll("section.compare").forEach(function (sec) {
    var kind = sec.dataset.kind, items = data[kind] || [];
    var prefix = kind === "systems" ? "" : "r";
    var a = sec.querySelector(".pick-a"), b = sec.querySelector(".pick-b");
    var chart = sec.querySelector(".compare-steps");
    var byId = {};
    items.forEach(function (it, i) {
      byId[it.id] = i;
      a.add(new Option(it.key, String(i))); b.add(new Option(it.key, String(i)));
    });
    // defaults: the URL's choice, else two items of the same benchmark, with step times if any
    function partner(i) {
      return items.findIndex(function (it, j) { return j !== i && it.benchmark === items[i].benchmark; });
    }
    function timed(it) { return it.profile && it.profile.x.length > 1; }
    var ia = byId[state[prefix + "a"]], ib = byId[state[prefix + "b"]];
    if (ia === undefined) {
      ia = items.findIndex(function (it, i) { var j = partner(i); return timed(it) && j >= 0 && timed(items[j]); });
      if (ia < 0) ia = items.findIndex(function (it, i) { return partner(i) >= 0; });
      if (ia < 0) ia = 0;
    }
    if (ib === undefined && items.length) {
      ib = partner(ia);
      if (ib < 0) ib = items.length > 1 ? (ia + 1) % items.length : ia;
    }
    if (items.length) { a.value = String(ia); b.value = String(ib); }
    function overlay(A, B) {
      if (!chart || typeof Plotly === "undefined") return;
      var traces = [A, B].filter(function (it) { return it.profile && it.profile.x.length > 1; })
        .map(function (it, k) {
          return { type: "scatter", mode: "lines", name: (k ? "B: " : "A: ") + shortName(it.key),
                   x: it.profile.x, y: it.profile.y,
                   line: { color: it.colour, width: 1.5, dash: k && A.colour === B.colour ? "dot" : "solid" } };
        });
      chart.classList.toggle("empty", !traces.length);
      if (!traces.length) { Plotly.purge(chart); chart.textContent = "no step times to overlay"; chart.dataset.rendered = "1"; return; }
      chart.textContent = "";
      var unit = (A.profile && A.profile.unit) || "step";
      Plotly.react(chart, traces, fitted({
        title: { text: "step time over the run (median across runs)", font: { size: 14 }, x: 0.01, xanchor: "left",
                 yref: "container", y: 1, yanchor: "top", pad: { t: 40 }, automargin: true },
        height: 360, margin: { l: 60, r: 20, t: 68, b: 50 }, showlegend: true,
        legend: { x: 1.02, xanchor: "left", y: 1, yanchor: "top", font: { size: 11 } },
        xaxis: { title: { text: unit }, automargin: true },
        yaxis: { title: { text: "seconds" }, automargin: true, rangemode: "tozero" }
      }), config).then(function () { chart.dataset.rendered = "1"; });
    }
    function fill() {
      var body = sec.querySelector("tbody");
      body.innerHTML = "";
      if (!items.length) { if (chart) { chart.textContent = "nothing to compare"; chart.dataset.rendered = "1"; } return; }
      var A = items[a.value], B = items[b.value];
      state[prefix + "a"] = A.id; state[prefix + "b"] = B.id;
      saveState();
      A.metrics.forEach(function (m, i) {
        var name = m[0], x = m[1], y = (B.metrics[i] || [])[1], better = m[2];
        var tr = body.insertRow();
        tr.insertCell().textContent = name;
        tr.insertCell().textContent = fmt(x);
        tr.insertCell().textContent = fmt(y);
        var d = tr.insertCell();
        if (x !== null && y !== null && x !== undefined && y !== undefined && x !== 0) {
          var delta = (y - x) / Math.abs(x);
          d.textContent = (delta >= 0 ? "+" : "") + (delta * 100).toFixed(1) + "%";
          // A time or a cost compared across GPU counts is not better or worse: no colour.
          var across = m[3] && A.gpus !== B.gpus;
          if (across) { d.textContent += " (different GPU counts)"; }
          if (better && !across && Math.abs(delta) >= 0.005) {
            var good = better === "lower" ? delta < 0 : delta > 0;
            d.className = good ? "better" : "worse";
          }
        } else { d.textContent = "-"; }
      });
      overlay(A, B);
    }
    a.addEventListener("change", fill); b.addEventListener("change", fill);
    fill();
  });
})();
