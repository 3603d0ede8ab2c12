/* mxfp4 notes beside asv's graphs (ci/history/asv_html.py publishes mxfp4/index.json and mxfp4/<benchmark>.json).
 *
 * On a graph page: a panel under the graph with the benchmark's standing notes, why the graph is
 * empty on a machine (from the per-measurement records: e.g. no GPU, so the GPU shapes are n/a),
 * the TFLOPS of the newest measurements (the same samples as the time) and every flagged
 * measurement (idle check overridden, warm-up never steady, clocks throttled).
 * On the benchmark grid: an empty thumbnail says why it is empty.
 * On the regressions page: over how many commits and machines it looked, why it is empty (e.g. no
 * GPU timings here: where GPU history comes from), and that a TFLOPS gain is never listed there.
 * asv's own scripts are untouched; this one watches the page and adds to it.
 */
'use strict';

(function () {
  var index = null;
  var perBenchmark = {};
  var pending = {};
  var shown = null;

  function esc(text) {
    return String(text).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
  }

  function load(url, done) {
    var request = new XMLHttpRequest();
    request.onload = function () {
      if (request.status === 200) {
        try { done(JSON.parse(request.responseText)); } catch (e) { done(null); }
      } else {
        done(null);
      }
    };
    request.onerror = function () { done(null); };
    request.open('GET', url);
    request.send();
  }

  function currentBenchmark() {
    var hash = decodeURIComponent(location.hash.replace(/^#/, ''));
    var name = hash.split('?')[0];
    return name && name !== '/' && name.indexOf('/') === -1 ? name : null;
  }

  function selectedParams() {
    var query = location.hash.split('?')[1] || '';
    var selected = {};
    query.split('&').forEach(function (part) {
      var kv = part.split('=');
      if (kv[0].indexOf('p-') === 0) {
        (selected[decodeURIComponent(kv[0].slice(2))] = selected[decodeURIComponent(kv[0].slice(2))] || []).push(
          decodeURIComponent(kv[1] || ''));
      }
    });
    return selected;
  }

  function panel() {
    var box = document.getElementById('mxfp4-notes');
    if (!box) {
      box = document.createElement('div');
      box.id = 'mxfp4-notes';
      box.style.cssText = 'position: fixed; left: 210px; right: 10px; bottom: 0; max-height: 32%; overflow: auto;' +
        'background: #fffdf3; border-top: 2px solid #e0c060; font: 13px sans-serif; padding: 6px 10px; z-index: 900';
      document.body.appendChild(box);
    }
    return box;
  }

  function plotPoints() {
    var $ = window.jQuery;
    var plot = $ && $('#main-graph').data('plot');
    if (!plot) return null;
    return plot.getData().reduce(function (n, s) {
      return n + s.data.filter(function (p) { return p && p[1] !== null && isFinite(p[1]); }).length;
    }, 0);
  }

  function isSelected(params, selected) {
    return Object.keys(selected).every(function (k) {
      // asv's URLs carry the values as asv stores them, quoted ('x'); accept them bare too.
      return selected[k].some(function (v) { return params.indexOf("'" + v.replace(/^'|'$/g, '') + "'") !== -1; });
    });
  }

  function unavailableLines(name) {
    var unavailable = (perBenchmark[name] || {}).unavailable || {};
    var selected = selectedParams();
    var lines = [];
    Object.keys(unavailable).forEach(function (machine) {
      Object.keys(unavailable[machine]).forEach(function (params) {
        if (isSelected(params, selected)) lines.push(machine + ' ' + params + ': ' + unavailable[machine][params]);
      });
    });
    return lines;
  }

  function newestRows(name) {
    var data = (perBenchmark[name] || {}).measured || {};
    var selected = selectedParams();
    var rows = [];
    var flagged = [];
    var $ = window.jQuery;
    var revision = function (c) { return Number(($ && $.asv && $.asv.get_revision(c)) || 0); };
    Object.keys(data).forEach(function (machine) {
      var commits = Object.keys(data[machine]);
      commits.forEach(function (commit) {
        Object.keys(data[machine][commit]).forEach(function (params) {
          var m = data[machine][commit][params];
          if (m.flagged) flagged.push([machine, commit, params, m.note]);
        });
      });
      commits.sort(function (a, b) { return revision(b) - revision(a); });
      if (!commits.length) return;
      var newest = data[machine][commits[0]];
      Object.keys(newest).forEach(function (params) {
        if (isSelected(params, selected)) rows.push([machine, commits[0], params, newest[params]]);
      });
    });
    return { rows: rows, flagged: flagged };
  }

  function render(name) {
    var box = panel();
    var html = '<b>' + esc(name) + '</b>';
    (index.standing[name] || []).forEach(function (note) { html += '<p style="margin: 4px 0">' + esc(note) + '</p>'; });
    var empty = index.empty[name] || {};
    var points = plotPoints();
    Object.keys(empty).forEach(function (machine) {
      html += '<p class="mxfp4-empty" style="margin: 4px 0; color: #8a4b00">No data on <b>' + esc(machine) + '</b>: ' +
        esc(empty[machine]) + '</p>';
    });
    if (points === 0 && !Object.keys(empty).length) {
      var lines = unavailableLines(name);
      html += '<p class="mxfp4-empty" style="margin: 4px 0; color: #8a4b00">No data for this selection of parameters' +
        (lines.length ? ', at the newest commit measured:</p><ul class="mxfp4-empty">' +
          lines.map(function (l) { return '<li>' + esc(l) + '</li>'; }).join('') + '</ul>' :
          ' (none of them was measured on these machines).</p>');
    }
    var table = newestRows(name);
    if (table.rows.length) {
      html += '<style>#mxfp4-notes td, #mxfp4-notes th { padding: 1px 10px 1px 0; text-align: left }</style>' +
        '<table style="border-collapse: collapse; margin-top: 4px"><tr><th>machine</th><th>commit</th>' +
        '<th>parameters</th><th>TFLOPS</th><th>median</th><th>measurement</th></tr>';
      table.rows.forEach(function (r) {
        var m = r[3];
        html += '<tr style="' + (m.flagged ? 'background: #ffe0d0' : '') + '"><td>' + esc(r[0]) + '</td><td>' +
          esc(r[1].slice(0, 8)) + '</td><td>' + esc(r[2]) + '</td><td class="mxfp4-tflops" style="text-align: right">' +
          (m.tflops === null ? 'n/a' : m.tflops.toPrecision(4)) + '</td><td style="text-align: right">' +
          (m.median_s === null ? 'n/a' : (m.median_s * 1e3).toPrecision(4) + ' ms') + '</td><td>' + esc(m.note) + '</td></tr>';
      });
      html += '</table>';
    }
    if (table.flagged.length) {
      html += '<p style="margin: 4px 0"><b>Flagged measurements</b> (in the graph, marked here; not clean):</p><ul>';
      table.flagged.forEach(function (f) {
        html += '<li class="mxfp4-flagged">' + esc(f[0]) + ' ' + esc(f[1].slice(0, 8)) + ' ' + esc(f[2]) + ': ' +
          esc(f[3]) + '</li>';
      });
      html += '</ul>';
    }
    box.innerHTML = html;
    box.style.display = 'block';
    // "complete" once this benchmark's notes file is in (tests wait for it).
    box.setAttribute('data-complete', pending[name] ? '' : '1');
  }

  function annotateGrid() {
    Object.keys(index.empty).forEach(function (name) {
      var cell = document.getElementById('summarygrid-' + name);
      if (!cell || cell.getAttribute('data-mxfp4')) return;
      cell.setAttribute('data-mxfp4', '1');
      var reasons = index.empty[name];
      var text = Object.keys(reasons).map(function (m) { return m + ': ' + reasons[m]; }).join(' | ');
      var note = document.createElement('div');
      note.className = 'mxfp4-empty';
      note.style.cssText = 'font-size: 10px; color: #8a4b00; white-space: normal; line-height: 1.2';
      note.textContent = 'empty: ' + text;
      cell.appendChild(note);
    });
  }

  // The regressions page says what it covers, and why it is empty when it is (asv says nothing).
  function explainRegressions() {
    var body = document.getElementById('regressions-body');
    var shownPage = document.getElementById('regressions-display');
    if (!body || !shownPage || shownPage.style.display === 'none' || !body.querySelector('.regression-div')) return;
    var listed = body.querySelectorAll('.regression-div table.table:not(.ignored) tr td').length > 0;
    var context = index.regressions_context || { commits: 0, machines: [], gpu_machines: [] };
    var html = '';
    if (!listed) {
      html += '<p><b>No regression listed</b>: none detected over ' + context.commits + ' commit' +
        (context.commits === 1 ? '' : 's') + ' on ' + esc(context.machines.join(', ') || 'no machine') + '.</p>';
    }
    if (!context.gpu_machines.length) {
      html += '<p class="mxfp4-no-gpu"><b>No GPU timings in these results</b> (no GPU on these machines), so no GEMM ' +
        'regression can be listed. ' + (context.gpu_history_help || '') + '</p>';
    }
    html += '<p>CPU timings (GemmOnCpu) are kept off this page: their run-to-run noise on the shared runner is 19-45%. ' +
      'asv lists rises in seconds only; a TFLOPS gain is a drop in seconds and is never listed here. ' +
      'A GPU GEMM timing is listed from a 2% rise (torch_dequant 12%, its time moves ~10% between processes), ' +
      'the rest from 5% (asv.conf.json; docs/CHANGE_POINTS.md). ' +
      '<a href="kernels/index.html">TFLOPS by kernel (higher is better)</a>.</p>';
    var box = document.getElementById('mxfp4-regressions-why');
    if (box && box.getAttribute('data-html') === html && box.parentNode === body) return;
    if (!box) {
      box = document.createElement('div');
      box.id = 'mxfp4-regressions-why';
      box.style.cssText = 'margin: 8px 0; padding: 6px 10px; background: #fffdf3; border-left: 4px solid #e0c060; font: 13px sans-serif';
    }
    box.innerHTML = html;
    box.setAttribute('data-html', html);
    body.insertBefore(box, body.firstChild);
  }

  function tick() {
    if (!index) return;
    explainRegressions();
    var name = currentBenchmark();
    var graphVisible = document.getElementById('graph-display') &&
      document.getElementById('graph-display').style.display !== 'none';
    if (!name || !graphVisible) {
      var box = document.getElementById('mxfp4-notes');
      if (box) box.style.display = 'none';
      shown = null;
      annotateGrid();
      return;
    }
    var state = name + location.hash + String(plotPoints());
    if (state === shown) return;
    if (perBenchmark[name] === undefined && index.measured.indexOf(name) !== -1) {
      perBenchmark[name] = {};
      pending[name] = true;
      load('mxfp4/' + encodeURIComponent(name) + '.json', function (data) {
        perBenchmark[name] = data || {};
        pending[name] = false;
        shown = null;
      });
    }
    shown = state;
    render(name);
  }

  if (location.protocol !== 'file:') {
    load('mxfp4/index.json', function (data) {
      index = data || { empty: {}, standing: {}, measured: [] };
      setInterval(tick, 300);
    });
  }
})();
