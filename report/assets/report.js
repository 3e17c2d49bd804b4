// The report's drawings (report/assets/, embedded by report/CMakeLists.txt).
// Every coordinate was computed in C++ (report/layout.h): this script only
// scales them to pixels, builds SVG as strings (so no namespace URL is
// needed), handles hover and view switching, and ends with a self-test.
// It renders synchronously so a headless browser's DOM dump sees the result.
(function () {
  'use strict';
  var D = JSON.parse(document.getElementById('data').textContent);
  var chosen = 0;  // index of the schedule drawn
  var LABEL_W = 190, ROW_H = 26, AXIS_H = 22, BAR_H = 16;
  var TEXT_PX = 6.2;  // a character's width at 11px system-ui, near enough to keep labels apart

  function esc(s) {
    return String(s).replace(/[&<>"']/g, function (c) {
      return {'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;'}[c];
    });
  }
  function fix(v, d) { return v === null || v === undefined ? '-' : Number(v).toFixed(d); }
  function colour(k) { return k < 0 ? '#ddd' : 'hsl(' + ((k * 137.5) % 360) + ',60%,72%)'; }
  function when(at) { return at ? new Date(at * 1000).toISOString().replace('T', ' ').slice(0, 19) + ' UTC' : 'unknown'; }
  function rect(x, y, w, h, attrs) {
    return '<rect x="' + x.toFixed(2) + '" y="' + y.toFixed(2) + '" width="' + Math.max(w, 0).toFixed(2) +
      '" height="' + h.toFixed(2) + '" ' + attrs + '/>';
  }
  function text(x, y, s, attrs) { return '<text x="' + x.toFixed(1) + '" y="' + y.toFixed(1) + '" ' + (attrs || '') + '>' + esc(s) + '</text>'; }
  function fit(s, px) { var n = Math.floor(px / TEXT_PX); return s.length <= n ? s : s.slice(0, Math.max(n - 1, 1)) + '\u2026'; }
  var HATCH = '<defs><pattern id="hatch" patternUnits="userSpaceOnUse" width="6" height="6" patternTransform="rotate(45)">' +
    '<rect width="6" height="6" fill="#f4c27a"/><line x1="0" y1="0" x2="0" y2="6" stroke="#b06d00" stroke-width="2"/></pattern></defs>';

  function laneName(count, l) {
    var names = D.lanes[String(count)];
    return names && names[l] ? names[l] : 'lane ' + l;
  }
  function scale(total) {
    var avail = Math.max(document.documentElement.clientWidth - LABEL_W - 380, 400);
    return total > 0 ? Math.max(avail / total, 4) : 4;
  }
  function axis(ppm, total, y) {
    var step = Math.pow(10, Math.floor(Math.log10(Math.max(total, 1e-6) / 8 || 1)));
    if (total / step > 16) step *= 5;
    var out = '';
    for (var t = 0; t <= total + 1e-9 && step > 0; t += step) {
      out += '<line class="bound" x1="' + (LABEL_W + t * ppm) + '" x2="' + (LABEL_W + t * ppm) + '" y1="' + (y - 4) + '" y2="' + y + '"/>' +
        text(LABEL_W + t * ppm + 2, y - 6, fix(t, Math.max(0, -Math.floor(Math.log10(step) + 1e-9))) + ' ms');
    }
    return out;
  }

  // The time the drawing spans: the stages, and a measured figure up to
  // 1.5 times them (bars() cuts a longer one).
  function span(stages, measured) {
    var m = measured && measured.median || 0;
    return stages > 0 && m > stages * 1.5 ? stages : Math.max(stages, m);
  }

  // Stage and op boxes of a timeline (tl: TimelineJson), stages[d][k] the rows.
  // Block labels share one line above the rows (every device's in the
  // multi-device view), so each is shortened to "b<n>" or left out when it
  // would run into the one before it.
  function boxes(tl, stagesOf, ppm, top) {
    var out = '', lastBlock = {}, labels = [];
    tl.stages.forEach(function (b) {
      var st = stagesOf(b[0])[b[1]], x = LABEL_W + b[2] * ppm, y = top + b[4] * ROW_H;
      out += rect(x, y, b[3] * ppm, b[5] * ROW_H - 2, 'class="st' + (b[7] ? ' est' : '') + '" fill="' + colour(b[1]) +
        '" fill-opacity="0.35" data-d="' + b[0] + '" data-s="' + b[1] + '" data-ms="' + b[3] + '"');
      var bound = lastBlock[b[0]] !== undefined && lastBlock[b[0]] !== st[1];
      out += '<line class="' + (bound ? 'block' : 'bound') + '" x1="' + x + '" x2="' + x + '" y1="' + (y - 3) + '" y2="' + (y + b[5] * ROW_H) + '"/>';
      if (bound || lastBlock[b[0]] === undefined) labels.push({x: x, block: st[1]});
      lastBlock[b[0]] = st[1];
    });
    labels.sort(function (a, b) { return a.x - b.x; });
    var end = -Infinity, named = {};
    labels.forEach(function (l, i) {
      if (named[l.block]) return;  // another device's start of a block already named
      var room = (i + 1 < labels.length ? labels[i + 1].x : Infinity) - l.x - 4;
      var fits = ['block ' + l.block, 'b' + l.block].filter(function (t) {
        return l.x >= end + 4 && TEXT_PX * t.length <= room;
      });
      if (!fits.length) return;
      out += text(l.x + 2, top - 4, fits[0], 'class="lane"');
      named[l.block] = true;
      end = l.x + 2 + TEXT_PX * fits[0].length;
    });
    tl.ops.forEach(function (o) {
      var nodes = o[0], merged = nodes.length > 1, x = LABEL_W + o[4] * ppm, w = o[5] * ppm;
      var y = top + o[3] * ROW_H + 3, op = D.ops[nodes[0]];
      out += rect(x, y, w, ROW_H - 8, 'class="op" fill="' + (merged ? 'url(#hatch)' : colour(o[2])) + '" data-i="' + nodes[0] +
        '" data-d="' + o[1] + '" data-s="' + o[2] + '" data-ms="' + (op[6] === null ? '' : op[6]) + '"' +
        (merged ? ' data-m="' + nodes.join(',') + '"' : ''));
      if (w >= 40) {
        var label = merged ? 'merged: ' + nodes.map(function (v) { return D.ops[v][0]; }).join('+') : op[0] + ' ' + op[1];
        out += text(x + 3, y + ROW_H / 2, fit(label, w - 6));
      }
    });
    return out;
  }

  // The end-to-end bars under the lanes, on their scale up to `total`; a
  // longer figure (a loaded machine, a slow first run) is cut there with a
  // break mark rather than shrinking every stage to a sliver.
  function bars(ppm, y, predicted, measured, total, name) {
    var out = '';
    function bar(ms, cls) {
      var cut = ms > total * 1.001, w = Math.min(ms, total) * ppm;
      return rect(LABEL_W, y, w, BAR_H, 'class="' + cls + '"') +
        (cut ? '<path class="cut" d="M' + (LABEL_W + w - 12) + ' ' + (y + BAR_H + 1) + 'l6 ' + (-BAR_H - 2) +
          'M' + (LABEL_W + w - 6) + ' ' + (y + BAR_H + 1) + 'l6 ' + (-BAR_H - 2) + '"/>' : '');
    }
    function end(ms) { return LABEL_W + Math.min(ms, total) * ppm + 4; }
    if (predicted !== null) {
      out += bar(predicted, 'bar') + text(4, y + 12, name) + text(end(predicted), y + 12, fix(predicted, 3) + ' ms');
    }
    y += BAR_H + 6;
    if (measured && measured.median !== null) {
      out += bar(measured.median, 'bar measured') + text(4, y + 12, 'measured') +
        text(end(measured.median), y + 12, fix(measured.median, 3) + ' \u00b1 ' + fix(measured.spread, 3) +
          ' ms (' + (measured.how || 'end to end') + (measured.from_db ? ', from the DB' : '') + ')');
    } else if (measured && measured.error) {
      out += text(4, y + 12, 'measured: failed: ' + measured.error);
    }
    return out;
  }

  function drawTimeline() {
    var s = D.schedules[chosen], tl = s.tl, rows = Math.max(tl.rows, 1);
    var total = span(Math.max(tl.total, s.predicted || 0), s.measured);
    var ppm = scale(total), top = AXIS_H + 14, h = top + rows * ROW_H + 2 * (BAR_H + 6) + 20;
    var out = HATCH + axis(ppm, total, AXIS_H);
    for (var r = 0; r < rows; ++r) {
      var name = s.rows[r] || ['lane ' + r, 0, ''];
      out += text(4, top + r * ROW_H + 16, fit(name[0], LABEL_W - 8), 'class="lane' + (name[1] ? ' mixed' : '') + '" data-lane="' + r + '"');
    }
    out += boxes(tl, function () { return s.stages; }, ppm, top);
    out += bars(ppm, top + rows * ROW_H + 8, s.predicted, s.measured, total, 'DP sum');
    var w = LABEL_W + total * ppm + 340;
    document.getElementById('timeline').innerHTML = '<svg width="' + w + '" height="' + h + '">' + out + '</svg>';
  }

  function drawGraph() {
    var s = D.schedules[chosen], big = D.ops.length > 500;
    var colW = big ? 56 : 120, layH = big ? 30 : 46, bw = colW - 12, bh = layH - 18;
    var w = D.width * colW + 20, h = D.layers * layH + 20, out = '', d = '';
    var mergedStage = {};
    if (s) s.stages.forEach(function (st, k) { if (st[0] === 'merge') mergedStage[k] = true; });
    function cx(v) { return 10 + D.ops[v][5] * colW + colW / 2; }
    function cy(v) { return 10 + D.ops[v][4] * layH; }
    for (var e = 0; e < D.edges.length; e += 2) {
      var a = D.edges[e], b = D.edges[e + 1], y1 = cy(a) + bh, y2 = cy(b), m = (y1 + y2) / 2;
      d += 'M' + cx(a).toFixed(1) + ' ' + y1.toFixed(1) + 'C' + cx(a).toFixed(1) + ' ' + m.toFixed(1) + ' ' +
        cx(b).toFixed(1) + ' ' + m.toFixed(1) + ' ' + cx(b).toFixed(1) + ' ' + y2.toFixed(1);
    }
    out += '<path class="edges" data-n="' + D.edges.length / 2 + '" d="' + d + '"/>';
    D.ops.forEach(function (op, v) {
      var x = cx(v) - bw / 2, y = cy(v);
      if (v === 0) {
        out += rect(x, y, bw, bh, 'class="in" fill="#fff" stroke="#333"') +
          text(x + 3, y + bh - 8, fit(op[0] === 'input' ? 'input' : 'input ' + op[0], bw));
        return;
      }
      var k = s ? s.stage_of[v] : -1;
      out += rect(x, y, bw, bh, 'class="gn' + (mergedStage[k] ? ' merged' : '') + '" fill="' + colour(k) + '" stroke="#333" data-i="' + v +
        '" data-s="' + k + '" data-ms="' + (op[6] === null ? '' : op[6]) + '"');
      if (!big) out += text(x + 3, y + bh - 8, fit(op[0], bw - 4));
    });
    document.getElementById('graph').innerHTML = '<svg width="' + w + '" height="' + h + '">' + out + '</svg>';
  }

  function drawMulti() {
    var M = D.multi, tl = M.tl, total = span(Math.max(tl.total, M.predicted || 0), M.measured);
    var ppm = scale(total), top = AXIS_H + 14, linkY = top + tl.rows * ROW_H + 6;
    var out = HATCH + axis(ppm, total, AXIS_H);
    M.devices.forEach(function (name, dv) {
      var first = tl.first_row[dv];
      out += '<line class="block" x1="0" x2="' + (LABEL_W + total * ppm) + '" y1="' + (top + first * ROW_H - 1) + '" y2="' + (top + first * ROW_H - 1) + '"/>';
      for (var r = 0; r < tl.dev_rows[dv]; ++r) {
        out += text(4, top + (first + r) * ROW_H + 16, fit(name, LABEL_W - 50) + ' \u00b7 ' + r, 'class="lane" data-lane="' + (first + r) + '"');
      }
    });
    out += boxes(tl, function (dv) { return M.stages[dv]; }, ppm, top);
    out += text(4, linkY + 14, 'link', 'class="lane"');
    tl.links.forEach(function (l) {
      out += rect(LABEL_W + l[1] * ppm, linkY + 2, Math.max(l[2] * ppm, 2), ROW_H - 8, 'class="link" data-t="' + l[0] + '"');
    });
    out += bars(ppm, linkY + ROW_H + 8, M.predicted, M.measured, total, 'predicted');
    var h = linkY + ROW_H + 2 * (BAR_H + 6) + 24;
    document.getElementById('multi').innerHTML = '<svg width="' + (LABEL_W + total * ppm + 340) + '" height="' + h + '">' + out + '</svg>';
  }

  // One tooltip for the whole page, found by delegation: no listener per shape.
  var tip = document.getElementById('tip');
  function stageLines(st, k) {
    return ['stage ' + k + ' (' + st[0] + ', block ' + st[1] + ')',
      'stage latency: ' + (st[2] === null ? 'none' : fix(st[2], 4) + ' ms') + ' (' + st[3] + ')',
      'measured: ' + when(st[4]) + ' on ' + D.device + (D.simulated ? ' (simulated)' : ''),
      'stage key id: ' + (st[5] || 'unknown')].concat(st[6] ? ['error: ' + st[6]] : []);
  }
  function describe(el) {
    if (el.hasAttribute('data-lane')) {
      var row = el.closest('#timeline') !== null && D.schedules[chosen].rows[+el.getAttribute('data-lane')];
      return row ? [row[2]] : [el.textContent];
    }
    var multi = el.closest('#multi') !== null, dv = +el.getAttribute('data-d') || 0;
    var stages = multi ? D.multi.stages[dv] : D.schedules[chosen] && D.schedules[chosen].stages;
    var k = el.getAttribute('data-s'), lines = [];
    if (el.hasAttribute('data-t')) {
      var t = D.multi.transfers[+el.getAttribute('data-t')];
      return ['copy of ' + D.ops[t[0]][0], D.multi.devices[t[1]] + ' \u2192 ' + D.multi.devices[t[2]], t[3] + ' bytes'];
    }
    if (el.hasAttribute('data-i')) {
      var ids = (el.getAttribute('data-m') || el.getAttribute('data-i')).split(',');
      ids.forEach(function (id) {
        var op = D.ops[+id];
        lines.push(op[0] + ': ' + op[2], '  ' + op[1] + ', output ' + op[3] + ', alone ' + (op[6] === null ? 'unknown' : fix(op[6], 4) + ' ms'));
      });
      if (el.closest('#timeline') !== null) {
        var row = Math.round((+el.getAttribute('y') - AXIS_H - 14) / ROW_H), st = stages[+k];
        lines.push('lane: ' + laneName(st[0] === 'merge' ? 1 : D.schedules[chosen].tl.stages[+k][5], row));
      }
    }
    if (multi) lines.push('device: ' + D.multi.devices[dv]);
    if (k !== null && +k >= 0 && stages && stages[+k]) lines = lines.concat(stageLines(stages[+k], +k));
    return lines;
  }
  document.addEventListener('mousemove', function (ev) {
    var el = ev.target.closest ? ev.target.closest('[data-i],[data-s],[data-t],[data-lane]') : null;
    if (!el || el.tagName === 'TD') { tip.hidden = true; return; }
    tip.textContent = describe(el).join('\n');
    tip.hidden = false;
    tip.style.left = Math.min(ev.clientX + 14, window.innerWidth - tip.offsetWidth - 4) + 'px';
    tip.style.top = Math.min(ev.clientY + 14, window.innerHeight - tip.offsetHeight - 4) + 'px';
  });
  // Clicking a stage outlines its operators in the graph.
  document.addEventListener('click', function (ev) {
    var el = ev.target.closest ? ev.target.closest('#timeline [data-s]') : null;
    if (!el) return;
    var k = el.getAttribute('data-s');
    document.querySelectorAll('#graph .gn').forEach(function (g) { g.classList.toggle('hl', g.getAttribute('data-s') === k); });
  });

  function picker() {
    document.querySelectorAll('.pick').forEach(function (div) {
      div.innerHTML = D.schedules.map(function (s, i) {
        return '<button data-pick="' + i + '"' + (i === chosen ? ' class="on"' : '') + '>' + esc(s.name) + '</button>';
      }).join('');
    });
  }
  document.addEventListener('click', function (ev) {
    var b = ev.target.closest ? ev.target.closest('[data-pick]') : null;
    if (!b) return;
    chosen = +b.getAttribute('data-pick');
    picker(); drawTimeline(); drawGraph();
  });

  var views = [].map.call(document.querySelectorAll('section.view'), function (s) { return s.id.slice(2); });
  function show(name) {
    if (views.indexOf(name) < 0) name = views[0];
    document.querySelectorAll('section.view').forEach(function (s) { s.classList.toggle('shown', s.id === 'v-' + name); });
    document.querySelectorAll('#views button').forEach(function (b) { b.classList.toggle('on', b.getAttribute('data-view') === name); });
  }
  document.getElementById('views').innerHTML = views.map(function (v) { return '<button data-view="' + v + '">' + v + '</button>'; }).join('');
  document.getElementById('views').addEventListener('click', function (ev) {
    var b = ev.target.closest('[data-view]');
    if (b) { show(b.getAttribute('data-view')); history.replaceState(null, '', '#view=' + b.getAttribute('data-view')); }
  });
  document.body.classList.add('js');
  var m = /view=(\w+)/.exec(location.hash);
  show(m ? m[1] : 'timeline');

  var rendered = false;
  try {
    picker();
    if (D.schedules.length) { drawTimeline(); drawGraph(); }
    if (D.multi) drawMulti();
    rendered = true;
  } catch (e) {
    window.iosErrors.push('render: ' + (e && e.stack || e));
  }

  // What a browser test reads back with --dump-dom (docs/report.md).
  var ppmMin = null, ppmMax = null;
  document.querySelectorAll('#timeline rect.st').forEach(function (r) {
    var ms = +r.getAttribute('data-ms');
    if (!(ms > 0)) return;
    var px = r.getBoundingClientRect().width || +r.getAttribute('width');
    var v = px / ms;
    ppmMin = ppmMin === null ? v : Math.min(ppmMin, v);
    ppmMax = ppmMax === null ? v : Math.max(ppmMax, v);
  });
  function count(sel) { return document.querySelectorAll(sel).length; }
  var result = {
    rendered: rendered,
    render_ms: performance.now(),
    counts: {
      lanes: count('#timeline text[data-lane]'), stage_boxes: count('#timeline rect.st'),
      timeline_ops: count('#timeline rect.op'), graph_ops: count('#graph rect[data-i]'),
      edges: D.edges.length / 2, multi_lanes: count('#multi text[data-lane]'), links: count('#multi rect.link'),
      matrix_cells: count('#matrix-table td')
    },
    px_per_ms: {min: ppmMin, max: ppmMax},
    resources: performance.getEntriesByType('resource').length,
    errors: window.iosErrors
  };
  var out = document.createElement('script');
  out.type = 'application/json';
  out.id = 'selftest';
  // Written again when an error, a CSP violation or a fetch comes after this
  // script (such events are queued, and later markup can cause them) and at
  // the load event, which --dump-dom waits for. Registered after the error
  // guard's listeners, in the same phases, so they run after its push.
  function write() {
    result.resources = performance.getEntriesByType('resource').length;
    out.textContent = JSON.stringify(result).replace(/</g, '\\u003c');
  }
  write();
  document.body.appendChild(out);
  addEventListener('error', write, true);
  ['unhandledrejection', 'securitypolicyviolation', 'load'].forEach(function (type) { addEventListener(type, write); });
})();
