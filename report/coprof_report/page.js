/*
 * copreport html's script (html.py inlines it after d3 and d3-flame-graph).
 *
 * It shows one view at a time: the URL's fragment names a <section
 * class="view"> ("#profile", "#contexts", "#fn-3", ...); an unknown or
 * empty fragment shows the profile.  The group buttons of the context and
 * slot views show one group's table or all; the order buttons of an
 * annotation switch its instructions between hottest first and address
 * order.  The flame graph (d3-flame-graph) and the timeline (a canvas
 * zoomed and panned by d3-zoom) are drawn from the page's JSON the first
 * time their view shows, when their box has a width.
 *
 * The fragment "#selftest" runs selfTest(): it drives the views as a user
 * would and writes "pass" or "fail: WHY" into body[data-selftest] (and a
 * <pre id="selftest">), which a headless browser's DOM dump shows.
 */
(function () {
  "use strict";

  var DATA = JSON.parse(document.getElementById("data").textContent);
  var drawn = {};

  function views() {
    return Array.prototype.slice.call(document.querySelectorAll("section.view"));
  }

  function show(hash) {
    var id = (hash || "").replace(/^#/, "");
    var target = id ? document.getElementById(id) : null;
    if (!target || !target.classList.contains("view")) {
      target = document.getElementById("profile");
    }
    views().forEach(function (v) { v.hidden = v !== target; });
    document.querySelectorAll("nav a").forEach(function (a) {
      a.classList.toggle("on", a.getAttribute("href") === "#" + target.id);
    });
    if (target.id === "flame" && !drawn.flame) { drawFlame(); }
    if (target.id === "timeline" && !drawn.timeline) { drawTimeline(); }
    return target;
  }

  /* --- group and order buttons --------------------------------------- */

  function showGroup(view, group) {
    view.querySelectorAll("div.group").forEach(function (d) {
      d.hidden = group !== "all" && d.getAttribute("data-group") !== group;
    });
    view.querySelectorAll("button.group").forEach(function (b) {
      b.classList.toggle("on", b.getAttribute("data-group") === group);
    });
  }

  function showOrder(view, order) {
    view.querySelectorAll("tbody[data-order]").forEach(function (t) {
      t.hidden = t.getAttribute("data-order") !== order;
    });
    view.querySelectorAll("button.order").forEach(function (b) {
      b.classList.toggle("on", b.getAttribute("data-order") === order);
    });
  }

  document.addEventListener("click", function (ev) {
    var b = ev.target.closest ? ev.target.closest("button") : null;
    if (!b) { return; }
    var view = b.closest("section.view");
    if (b.classList.contains("group")) {
      showGroup(view, b.getAttribute("data-group"));
    } else if (b.classList.contains("order")) {
      showOrder(view, b.getAttribute("data-order"));
    }
  });

  /* --- flame graph ---------------------------------------------------- */

  function drawFlame() {
    drawn.flame = true;
    var box = document.getElementById("flamegraph");
    if (!box || !DATA.flame) { return; }
    var chart = flamegraph.default()
      .width(Math.max(box.clientWidth, 400))
      .cellHeight(18)
      .transitionDuration(250)
      .minFrameSize(1)
      .title("")
      .onClick(function (d) {
        var p = document.getElementById("flame-fn");
        p.textContent = d.data.name + ": " + d.value + " samples ";
        if (d.data.fn) {
          var a = document.createElement("a");
          a.href = "#" + d.data.fn;
          a.className = "fn";
          a.textContent = "annotation";
          p.appendChild(a);
        }
      });
    d3.select(box).datum(DATA.flame).call(chart);
  }

  /* --- timeline --------------------------------------------------------- */

  var TRACK = 16, GROUP = 20, AXIS = 22, LABEL = 190;
  var STATE_COLOURS = { running: "#3a8f3a", runnable: "#e0a030",
                        blocked: "#b0b0b0" };
  var timelineApi = null;

  function colour(name) {
    if (STATE_COLOURS[name]) { return STATE_COLOURS[name]; }
    var h = 0;
    for (var i = 0; i < name.length; i++) { h = (h * 31 + name.charCodeAt(i)) | 0; }
    return d3.schemeTableau10[Math.abs(h) % 10];
  }

  function layout(tl) {
    var rows = [], y = AXIS, group = null;
    tl.tracks.forEach(function (t) {
      if (t.group !== group) {
        group = t.group;
        rows.push({ header: group, y: y });
        y += GROUP;
      }
      rows.push({ track: t, y: y });
      y += TRACK;
    });
    return { rows: rows, height: y + 4 };
  }

  function sliceAt(track, t) {
    var x = track.x, lo = 0, hi = x.length - 1, best = null;
    while (lo <= hi) {
      var mid = (lo + hi) >> 1;
      if (x[mid][0] <= t) { best = mid; lo = mid + 1; } else { hi = mid - 1; }
    }
    for (var k = best; k !== null && k >= 0 && k > best - 50; k--) {
      if (x[k][0] <= t && t <= x[k][0] + x[k][1]) { return x[k]; }
    }
    return null;
  }

  function ms(us) { return (us / 1000).toFixed(3) + " ms"; }

  function drawTimeline() {
    drawn.timeline = true;
    var tl = DATA.timeline, box = document.getElementById("tl-box");
    var canvas = document.getElementById("tl-canvas");
    var width = Math.max(box.clientWidth, 600), lay = layout(tl);
    var ratio = window.devicePixelRatio || 1;
    canvas.width = width * ratio;
    canvas.height = lay.height * ratio;
    canvas.style.width = width + "px";
    canvas.style.height = lay.height + "px";
    var ctx = canvas.getContext("2d");
    ctx.scale(ratio, ratio);
    var x0 = d3.scaleLinear().domain([0, Math.max(tl.t1, 1)])
      .range([LABEL, width - 4]);
    var xs = x0, count = 0;

    function draw() {
      count = 0;
      ctx.clearRect(0, 0, width, lay.height);
      ctx.font = "11px sans-serif";
      ctx.textBaseline = "middle";
      var lo = xs.invert(LABEL), hi = xs.invert(width);
      lay.rows.forEach(function (r) {
        if (r.header) {
          ctx.fillStyle = "#222";
          ctx.fillText(r.header, 4, r.y + GROUP / 2);
          ctx.fillStyle = "#eee";
          ctx.fillRect(LABEL, r.y + GROUP - 2, width - LABEL, 1);
          return;
        }
        var t = r.track;
        t.x.forEach(function (s) {
          if (s[0] > hi || s[0] + s[1] < lo) { return; }
          var a = Math.max(xs(s[0]), LABEL), b = Math.min(xs(s[0] + s[1]), width);
          var name = tl.names[s[2]];
          ctx.fillStyle = colour(name);
          ctx.fillRect(a, r.y + 1, Math.max(b - a, 1), TRACK - 2);
          if (b - a > 40) {
            ctx.save();
            ctx.beginPath();
            ctx.rect(a, r.y, b - a - 2, TRACK);
            ctx.clip();
            ctx.fillStyle = "#fff";
            ctx.fillText(name, a + 2, r.y + TRACK / 2);
            ctx.restore();
          }
          count++;
        });
        ctx.fillStyle = "#000";
        t.i.forEach(function (s) {
          if (s[0] < lo || s[0] > hi) { return; }
          ctx.fillRect(xs(s[0]), r.y + 2, 1, TRACK - 4);
          count++;
        });
        ctx.fillStyle = "#fff";
        ctx.fillRect(0, r.y, LABEL, TRACK);
        ctx.fillStyle = "#333";
        ctx.fillText(t.name.length > 30 ? t.name.slice(0, 29) + "\u2026" : t.name,
                     12, r.y + TRACK / 2);
      });
      ctx.fillStyle = "#fff";
      ctx.fillRect(0, 0, width, AXIS);
      ctx.fillStyle = "#333";
      xs.ticks(8).forEach(function (v) {
        var px = xs(v);
        if (px < LABEL) { return; }
        ctx.fillRect(px, AXIS - 5, 1, 5);
        ctx.fillText((v / 1000).toFixed(3).replace(/\.?0+$/, "") + " ms",
                     px + 2, AXIS / 2);
      });
      timelineApi.drawn = count;
    }

    var zoom = d3.zoom()
      .scaleExtent([1, 1e7])
      .extent([[LABEL, 0], [width, lay.height]])
      .translateExtent([[LABEL, 0], [width, lay.height]])
      .filter(function (ev) { return !ev.button && ev.type !== "dblclick"; })
      .on("zoom", function (ev) { xs = ev.transform.rescaleX(x0); draw(); });
    var sel = d3.select(canvas);
    sel.call(zoom);

    canvas.addEventListener("mousemove", function (ev) {
      var rect = canvas.getBoundingClientRect();
      var px = ev.clientX - rect.left, py = ev.clientY - rect.top;
      var info = document.getElementById("tl-info"), text = "";
      lay.rows.forEach(function (r) {
        if (r.track && py >= r.y && py < r.y + TRACK && px >= LABEL) {
          var s = sliceAt(r.track, xs.invert(px));
          text = r.track.name + (s ? ": " + tl.names[s[2]] + " at " + ms(s[0]) +
                                 " for " + ms(s[1]) : "");
        }
      });
      info.textContent = text;
    });
    document.getElementById("tl-in").onclick = function () { zoom.scaleBy(sel, 2); };
    document.getElementById("tl-out").onclick = function () { zoom.scaleBy(sel, 0.5); };
    document.getElementById("tl-reset").onclick = function () {
      zoom.transform(sel, d3.zoomIdentity);
    };
    timelineApi = window.coprofTimeline = {
      drawn: 0,
      domain: function () { return xs.domain(); },
      zoomBy: function (k) { zoom.scaleBy(sel, k); }
    };
    draw();
  }

  /* --- self-test ------------------------------------------------------------ */

  function visible(el) { return !!el && el.offsetParent !== null; }

  function click(el) {
    el.click();
  }

  function selfTest() {
    var checks = [];
    var steps = [
      function () {
        if (!visible(document.getElementById("profile"))) {
          throw "the profile is not shown first";
        }
        var link = document.querySelector("#profile a.fn");
        if (!link) { throw "no function link in the profile"; }
        click(link);
        checks.push("link " + link.getAttribute("href"));
        return link;
      },
      function (link) {
        var id = link.getAttribute("href").slice(1);
        var fn = document.getElementById(id);
        if (location.hash !== "#" + id || !visible(fn)) {
          throw "the function link did not show " + id;
        }
        if (visible(document.getElementById("profile"))) {
          throw "the profile still shows beside " + id;
        }
        var counts = Array.prototype.map.call(
          fn.querySelectorAll("tbody[data-order=samples] tr.insn td:first-child"),
          function (td) { return +td.textContent; });
        if (!counts.length || counts[0] !== Math.max.apply(null, counts)) {
          throw id + "'s instructions are not hottest first";
        }
        click(fn.querySelector("button[data-order=address]"));
        if (!visible(fn.querySelector("tbody[data-order=address] tr.insn"))) {
          throw id + "'s address order does not show";
        }
        click(document.querySelector("nav a[href='#contexts']"));
      },
      function () {
        var v = document.getElementById("contexts");
        if (!visible(v)) { throw "the context view does not show"; }
        var groups = v.querySelectorAll("div.group");
        var b = v.querySelector("button.group[data-group='0']");
        if (!groups.length || !b) { throw "the context view has no groups"; }
        click(b);
        var shown = Array.prototype.filter.call(groups, visible).length;
        if (shown !== 1) { throw "a context's button shows " + shown + " groups"; }
        checks.push(groups.length + " contexts");
        click(document.querySelector("nav a[href='#slots']"));
      },
      function () {
        var v = document.getElementById("slots");
        if (!visible(v) || !v.querySelector("table.profile")) {
          throw "the slot view does not show a table";
        }
        click(document.querySelector("nav a[href='#flame']"));
      },
      function () {
        if (!visible(document.getElementById("flame"))) {
          throw "the flame graph view does not show";
        }
      },
      function () {
        if (DATA.flame) {
          var frames = document.querySelectorAll("#flamegraph svg g.frame");
          if (frames.length < 2) { throw "the flame graph drew " + frames.length + " frames"; }
          checks.push(frames.length + " flame frames");
        } else {
          if (!visible(document.getElementById("no-stacks"))) {
            throw "no stacks and no line saying why";
          }
          checks.push("no stacks");
        }
        click(document.querySelector("nav a[href='#timeline']"));
      },
      function () {
        var api = window.coprofTimeline;
        if (!visible(document.getElementById("timeline")) || !api) {
          throw "the timeline does not show";
        }
        if (!api.drawn) { throw "the timeline drew nothing"; }
        var d = api.domain(), before = d[1] - d[0];
        api.zoomBy(8);
        d = api.domain();
        var after = d[1] - d[0];
        if (!(after < before / 7.9 && after > before / 8.1)) {
          throw "zooming 8 times made the domain " + before + " -> " + after;
        }
        if (!api.drawn) { throw "the zoomed timeline drew nothing"; }
        checks.push("timeline " + before.toFixed(0) + "us -> " + after.toFixed(0) + "us");
      }
    ];
    var out = document.createElement("pre");
    out.id = "selftest";
    document.body.appendChild(out);
    var failed = false;
    function finish(result) {
      if (failed) { return; }           /* the first failure stands */
      failed = result !== "pass";
      document.body.setAttribute("data-selftest", result);
      out.textContent = "selftest: " + result + " (" + checks.join(", ") + ")";
    }
    function run(k, value) {
      if (failed) { return; }
      if (k === steps.length) { finish("pass"); return; }
      try {
        value = steps[k](value);
      } catch (err) {
        finish("fail: " + err);
        return;
      }
      setTimeout(function () { run(k + 1, value); }, 50);
    }
    window.addEventListener("error", function (ev) {
      finish("fail: script error " + ev.message);
    });
    show("#profile");
    history.replaceState(null, "", "#profile");
    run(0);
  }

  window.addEventListener("hashchange", function () { show(location.hash); });
  var selftest = location.hash === "#selftest";
  show(selftest ? "#profile" : location.hash);
  document.body.setAttribute("data-rendered", "yes");
  if (selftest) { selfTest(); }
}());
