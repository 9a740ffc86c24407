// tlparse-py: search across the whole report, from any page (press "/" to focus the box).
// The index lives in script files written with the report (static/search-index.js names them;
// static/search/index-<n>.js hold the entries), loaded only once the box is first used, so it works
// from file:// where fetching JSON is not allowed. Results are built with textContent, never HTML.
(function () {
  "use strict";
  var box = document.getElementById("search");
  var manifest = window.TLPARSE_SEARCH_INDEX;
  if (!box || !manifest || !manifest.shards || !manifest.shards.length) return;  // no index: no box
  var input = box.querySelector("input");
  var panel = box.querySelector(".search-results");
  var root = box.getAttribute("data-root") || "";
  var query = window.location.search;  // kept on links, as report.js keeps it (an artifact server's token)
  var MIN_CHARS = 2, MAX_RESULTS = 200, PER_ENTRY = 20, BEFORE = 60, AFTER = 140;
  var requested = false, waiting = 0, failed = 0, timer = null;
  box.hidden = false;

  // -- the index ------------------------------------------------------------------------------
  function load() {
    if (requested) return;
    requested = true;
    window.TLPARSE_SEARCH = window.TLPARSE_SEARCH || [];
    manifest.shards.forEach(function (name) {
      var script = document.createElement("script");
      script.src = root + "static/" + name;
      script.async = true;
      waiting++;
      script.addEventListener("load", function () { waiting--; schedule(0); });
      script.addEventListener("error", function () { waiting--; failed++; schedule(0); });
      document.head.appendChild(script);
    });
  }
  function shards() {
    return (window.TLPARSE_SEARCH || []).slice().sort(function (a, b) { return a[0] - b[0]; });
  }

  // -- matching -------------------------------------------------------------------------------
  function escapeRegExp(text) { return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"); }
  function search(text) {
    var pattern = new RegExp(escapeRegExp(text), "gi");
    var results = [], complete = true, all = shards();
    for (var s = 0; s < all.length && complete; s++) {
      var entries = all[s][1];
      for (var e = 0; e < entries.length; e++) {
        var entry = entries[e], body = entry[3], found = 0, line = 1, counted = 0, match;
        if (typeof body !== "string") continue;
        pattern.lastIndex = 0;
        while ((match = pattern.exec(body)) !== null) {
          var start = body.lastIndexOf("\n", match.index - 1) + 1;
          var end = body.indexOf("\n", match.index);
          if (end < 0) end = body.length;
          for (var i = body.indexOf("\n", counted); i >= 0 && i < start; i = body.indexOf("\n", i + 1)) line++;
          counted = start;
          if (results.length >= MAX_RESULTS) { complete = false; break; }
          results.push({ entry: entry, line: line, text: body.slice(start, end), at: match.index - start, length: match[0].length });
          if (++found >= PER_ENTRY) break;
          pattern.lastIndex = Math.max(end + 1, match.index + match[0].length);
        }
        if (!complete) break;
      }
    }
    return { results: results, complete: complete };
  }

  // -- showing --------------------------------------------------------------------------------
  function element(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }
  function link(url, prefix, line) {
    var hash = url.indexOf("#"), page = hash < 0 ? url : url.slice(0, hash), anchor = hash < 0 ? "" : url.slice(hash);
    if (prefix && line) anchor = "#" + prefix + line;
    return root + page + query + anchor;
  }
  function snippet(result) {
    var code = element("code", "search-snippet");
    var indent = Math.min(result.at, result.text.length - result.text.replace(/^\s+/, "").length);
    var from = Math.max(indent, result.at - BEFORE), to = Math.min(result.text.length, result.at + result.length + AFTER);
    code.appendChild(document.createTextNode((from > indent ? "…" : "") + result.text.slice(from, result.at)));
    code.appendChild(element("mark", "", result.text.slice(result.at, result.at + result.length)));
    code.appendChild(document.createTextNode(result.text.slice(result.at + result.length, to) + (to < result.text.length ? "…" : "")));
    return code;
  }
  function hit(result) {
    var entry = result.entry, prefix = entry[4], alt = entry[5];
    var item = element("li", "search-hit");
    var main = element("a", "search-main");
    main.href = link(entry[2], prefix, result.line);
    main.appendChild(element("span", "search-kind", entry[0]));
    var multiline = entry[3].indexOf("\n") >= 0;
    main.appendChild(element("span", "search-title", entry[1] + (prefix || multiline ? " · line " + result.line : "")));
    main.appendChild(snippet(result));
    item.appendChild(main);
    if (alt && alt[1]) {
      var other = element("a", "search-alt", alt[0]);
      other.href = link(alt[1], alt[2], result.line);
      item.appendChild(other);
    }
    return item;
  }
  function show() {
    var text = input.value.trim();
    panel.textContent = "";
    if (text.length < MIN_CHARS) { panel.hidden = true; return; }
    load();
    var found = search(text);
    var status = element("p", "search-status");
    if (waiting) status.textContent = "Loading the index (" + (manifest.shards.length - waiting) + " of " + manifest.shards.length + " files)… ";
    status.appendChild(document.createTextNode(
      found.results.length ? (found.complete ? found.results.length : "The first " + found.results.length) + " match" + (found.results.length === 1 ? "" : "es") + "."
        : waiting ? "" : "No match."));
    panel.appendChild(status);
    if (failed) panel.appendChild(element("p", "search-note", failed + " index file(s) could not be loaded: the results are incomplete."));
    if (manifest.note) panel.appendChild(element("p", "search-note", manifest.note));
    var list = element("ol", "search-list");
    found.results.forEach(function (result) { list.appendChild(hit(result)); });
    panel.appendChild(list);
    panel.setAttribute("data-query", text);  // what the results shown are for
    panel.hidden = false;
  }
  function schedule(delay) {
    if (timer !== null) clearTimeout(timer);
    timer = setTimeout(function () { timer = null; show(); }, delay);
  }

  // -- keys -----------------------------------------------------------------------------------
  function links() { return Array.prototype.slice.call(panel.querySelectorAll("a.search-main")); }
  function typing(target) {
    return target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName));
  }
  document.addEventListener("keydown", function (event) {
    if (event.key !== "/" || event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) return;
    event.preventDefault();
    input.focus();
    input.select();
  });
  input.addEventListener("focus", load);
  input.addEventListener("input", function () { schedule(120); });
  box.addEventListener("keydown", function (event) {
    var all = links(), at = all.indexOf(document.activeElement);
    if (event.key === "Escape") {
      panel.hidden = true;
      input.blur();
    } else if (event.key === "ArrowDown" && all.length) {
      event.preventDefault();
      all[Math.min(at + 1, all.length - 1)].focus();
    } else if (event.key === "ArrowUp" && all.length) {
      event.preventDefault();
      if (at <= 0) input.focus(); else all[at - 1].focus();
    } else if (event.key === "Enter" && event.target === input) {
      event.preventDefault();
      if (timer !== null) { clearTimeout(timer); timer = null; show(); }
      all = links();
      if (all.length) all[0].click();
    }
  });
  input.addEventListener("focus", function () { if (input.value.trim().length >= MIN_CHARS) schedule(0); });
  document.addEventListener("click", function (event) {
    if (!box.contains(event.target)) panel.hidden = true;
  });
  panel.addEventListener("click", function (event) {
    if (event.target.closest && event.target.closest("a")) panel.hidden = true;
  });
})();
