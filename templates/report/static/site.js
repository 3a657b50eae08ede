/* azbench report site: draws the embedded plotly specs, sorts and filters tables, and fills the
   compare view. No network: plotly.js is loaded from ../assets next to this file. */
(function () {
  "use strict";
  var figures = JSON.parse(document.getElementById("figures").textContent || "{}");
  var config = { displaylogo: false, responsive: true, scrollZoom: false };

  function draw(el) {
    if (el.dataset.drawn) return;
    var fig = figures[el.dataset.fig];
    if (!fig || typeof Plotly === "undefined") { el.textContent = "chart unavailable"; return; }
    el.dataset.drawn = "1";
    Plotly.newPlot(el, fig.data, fig.layout, config).then(function () {
      el.dataset.rendered = "1";
    });
  }
  document.querySelectorAll(".chart").forEach(function (el) {
    if (!el.classList.contains("lazy") || el.closest("details[open]")) draw(el);
  });
  // charts inside a closed <details> (a run's drill-down) are drawn when it opens
  document.querySelectorAll("details").forEach(function (d) {
    d.addEventListener("toggle", function () {
      if (d.open) d.querySelectorAll(".chart").forEach(draw);
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

  // -- compare: two systems or two runs, delta = (B - A) / A
  var data = document.getElementById("compare-data");
  if (data) {
    data = JSON.parse(data.textContent);
    document.querySelectorAll("section.compare").forEach(function (sec) {
      var items = data[sec.dataset.kind] || [];
      var a = sec.querySelector(".pick-a"), b = sec.querySelector(".pick-b");
      items.forEach(function (it, i) {
        a.add(new Option(it.key, i)); b.add(new Option(it.key, i));
      });
      if (items.length > 1) b.selectedIndex = 1;
      function fmt(v) {
        if (v === null || v === undefined) return "-";
        return Math.abs(v) >= 100 ? v.toFixed(1) : Number(v.toPrecision(4)).toString();
      }
      function fill() {
        var body = sec.querySelector("tbody");
        body.innerHTML = "";
        if (!items.length) return;
        var A = items[a.value].metrics, B = items[b.value].metrics;
        Object.keys(A).forEach(function (m) {
          var tr = body.insertRow(), x = A[m], y = B[m];
          tr.insertCell().textContent = m;
          tr.insertCell().textContent = fmt(x);
          tr.insertCell().textContent = fmt(y);
          var d = tr.insertCell();
          if (x !== null && y !== null && x !== undefined && y !== undefined && x !== 0) {
            var delta = (y - x) / Math.abs(x);
            d.textContent = (delta >= 0 ? "+" : "") + (delta * 100).toFixed(1) + "%";
          } else { d.textContent = "-"; }
        });
      }
      a.addEventListener("change", fill); b.addEventListener("change", fill);
      fill();
    });
  }
})();
