/* mxfp4 notes beside asv's graphs (ci/history/site/asv_html.py publishes mxfp4/index.json and mxfp4/<benchmark>.json).
 *
 * On a graph page: a panel under the graph (never over it) with the benchmark's standing notes, why the graph is
 * empty on a machine (from the per-measurement records: e.g. no GPU, so the GPU shapes are n/a),
 * the TFLOPS of the newest measurements (the same samples as the time) and every flagged
 * measurement (idle check overridden, warm-up never steady, clocks throttled).
 * On the benchmark grid: an empty thumbnail says why it is empty; the others' y axes fit their data.
 * On the regressions page: over how many commits and machines it looked, why it is empty (e.g. no
 * GPU timings here: where GPU history comes from), that a TFLOPS gain is never listed there, and
 * every change point of the whole history (kernels/change_points.json), which asv's window misses.
 * On a graph page the notes take a band at the window's bottom and asv's graph is fitted above it.
 * asv's own scripts are untouched; this one watches the page and adds to it.
 */
'use strict';

(function () {
  var index = null;
  var perBenchmark = {};
  var pending = {};
  var shown = null;

  // Quotes too: some values go into attributes (a commit subject is anyone's text).
  function esc(text) {
    return String(text).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;')
      .replace(/'/g, '&#39;');
  }

  // A change point's regression issue (kernels/change_points.json, ci/history/site/issue_links.py): its number linked to
  // the issue, and its state in words; only an https address is linked.
  function issueHtml(issue) {
    if (!issue) return '';
    var words = String(issue.words || '');
    var number = '#' + Number(issue.number);
    var link = /^https:\/\//.test(String(issue.url)) ? '<a href="' + esc(issue.url) + '">' + esc(number) + '</a>' : esc(number);
    return '<span class="mxfp4-issue mxfp4-issue-' + (issue.state === 'open' ? 'open' : 'closed') + '">' + link +
      esc(words.indexOf(number) === 0 ? words.slice(number.length) : ' ' + words) + '</span>';
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

  // asv's graph fills the window (an absolutely placed box, main-graph above its overview); the notes go in a band
  // of the window's bottom that the graph's box is shrunk out of, so they never cover the plot or its axes.
  var NOTES_SHARE = 0.3;  // of the window's height at most; the band scrolls past that
  var graphBoxBottom = null;  // asv's own bottom of the graph's box, restored when the notes are hidden

  function graphBox() {
    var graph = document.getElementById('graph');
    return graph && graph.parentNode && graph.parentNode.id !== 'graph-display' ? graph.parentNode : null;
  }

  function panel() {
    var box = document.getElementById('mxfp4-notes');
    if (!box) {
      box = document.createElement('div');
      box.id = 'mxfp4-notes';
      box.style.cssText = 'position: absolute; left: 220px; right: 20px; bottom: 0; overflow: auto; box-sizing: border-box;' +
        'background: #fffdf3; border-top: 2px solid #e0c060; font: 13px sans-serif; padding: 6px 10px 22px';  // the site's stamp sits over the last 20px
      (document.getElementById('graph-display') || document.body).appendChild(box);
    }
    return box;
  }

  // The notes' band: as tall as its text, at most NOTES_SHARE of the window; the graph's box ends above it.
  function fitGraphAbove(box) {
    var outer = graphBox();
    if (!outer) return;
    if (graphBoxBottom === null) graphBoxBottom = outer.style.bottom || '10px';
    box.style.maxHeight = Math.round(window.innerHeight * NOTES_SHARE) + 'px';
    // asv's overview graph overflows the box by its 24px top padding (index.html): the band starts below that.
    var bottom = (box.style.display === 'none' ? graphBoxBottom : (box.offsetHeight + 24 + 8) + 'px');
    if (outer.style.bottom !== bottom) {
      outer.style.bottom = bottom;
      window.dispatchEvent(new Event('resize'));  // asv redraws its graphs on a resize (graphdisplay.js)
    }
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
    fitGraphAbove(box);
    // "complete" once this benchmark's notes file is in (tests wait for it).
    box.setAttribute('data-complete', pending[name] ? '' : '1');
  }

  // asv draws each thumbnail from zero (summarygrid.js): a line of 1-3% steps is then a flat line on the box's top
  // edge, and a thumbnail with data reads as empty. Each drawn thumbnail's y axis is fitted to its data instead.
  function fitThumbnails() {
    var $ = window.jQuery;
    if (!$) return;
    $('#summarygrid-display .benchmark-plot').each(function () {
      var plot = $(this).data('plot');
      if (!plot || this.getAttribute('data-mxfp4-fitted')) return;
      var values = [];
      plot.getData().forEach(function (s) {
        s.data.forEach(function (p) { if (p && p[1] !== null && isFinite(p[1])) values.push(p[1]); });
      });
      this.setAttribute('data-mxfp4-fitted', '1');
      if (!values.length) return;
      var low = Math.min.apply(null, values), high = Math.max.apply(null, values);
      var pad = Math.max(high - low, Math.abs(high) * 0.01) * 0.15 || 1;  // a line of zeros: a band around zero
      var axis = plot.getAxes().yaxis;
      axis.options.min = low - pad;
      axis.options.max = high + pad;
      plot.setupGrid();
      plot.draw();
    });
  }

  // A thumbnail says "empty" only when its graph is: no machine has a value for it (a benchmark measured on the
  // GPU machine and n/a on the others draws that machine's data, and says nothing).
  function annotateGrid() {
    Object.keys(index.empty).forEach(function (name) {
      var cell = document.getElementById('summarygrid-' + name);
      if (!cell || cell.getAttribute('data-mxfp4') || (index.with_data && (index.with_data[name] || []).length)) return;
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

  // Every change point of the whole history (kernels/change_points.json, from the same checks as the kernel pages):
  // asv lists steps over the newest commits it publishes only, where a long history holds few of them.
  var changePoints = null;  // null: not asked yet; false: asked, none there

  function changePointsHtml(context) {
    if (changePoints === null) {
      changePoints = false;
      load('kernels/change_points.json', function (data) { changePoints = data || false; });
      return '';
    }
    if (!changePoints) return '';
    var rows = changePoints.change_points || [];
    var html = '<h3 id="mxfp4-change-points-title" style="margin-top: 14px">Change points over the whole history: ' + rows.length +
      '</h3><p>The project\'s detector on every GPU line\'s TFLOPS (higher is better; red: a regression), over all of the history; ' +
      'asv\'s own list, below this one, covers only the newest ' + context.commits + ' commits it publishes. ' + esc(changePoints.method || '') +
      '. Each row opens its kernel\'s page.</p>' +
      (changePoints.issues_note ? '<p id="mxfp4-issues-note">' + esc(changePoints.issues_note) + '</p>' : '');
    var withIssues = changePoints.issues_known === true;  // unknown: the note says why, and no column
    if (!rows.length) return html + '<p id="mxfp4-no-change-points">None found on any GPU line.</p>';
    html += '<table id="mxfp4-change-points" class="table table-condensed" style="font-size: 13px"><tr><th>date (UTC)</th>' +
      '<th>TFLOPS change [95% interval, %]</th><th>line</th><th>suspected commits</th><th>commits at the new level</th>' +
      (withIssues ? '<th>regression issue</th>' : '') + '</tr>';
    rows.forEach(function (r) {
      var red = r.direction === 'regression';
      html += '<tr class="mxfp4-' + (red ? 'regression' : 'improvement') + '"><td>' + esc(r.date || '?') + '</td>' +
        '<td style="font-weight: bold; color: ' + (red ? '#d73027' : '#1a9850') + '">' + esc(r.label) + '</td>' +
        '<td><a href="' + esc(r.page) + '">' + esc(r.kernel_config + ' ' + r.shape) + '</a> on ' + esc(r.machine) + '</td>' +
        '<td title="' + esc(r.subject || '') + '"><code>' + esc(r.last_before.slice(0, 8) + '..' + r.first_after.slice(0, 8)) + '</code></td>' +
        '<td>' + esc(r.commits_at_new_level === null ? '?' : r.commits_at_new_level) + '</td>' +
        (withIssues ? '<td class="mxfp4-issue-cell">' + issueHtml(r.issue) + '</td>' : '') + '</tr>';
    });
    return html + '</table>';
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
        (context.commits === 1 ? '' : 's') + ' on ' + esc(context.machines.join(', ') || 'no machine') +
        (changePoints && (changePoints.change_points || []).length ? ' (the newest commits asv publishes; the whole ' +
          'history\'s change points are listed below)' : '') + '.</p>';
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
    html += changePointsHtml(context);
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
      if (box) { box.style.display = 'none'; fitGraphAbove(box); }
      shown = null;
      annotateGrid();
      fitThumbnails();
      return;
    }
    var state = name + location.hash + String(plotPoints());
    if (state === shown) {
      fitGraphAbove(panel());  // the window may have been resized
      return;
    }
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
