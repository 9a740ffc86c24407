// tlparse-py: optional niceties; every page reads fine with scripts off.
(function () {
  "use strict";
  // Keep a report's query string (e.g. an artifact server's access token) on relative links,
  // so moving between pages of a hosted report keeps working.
  var query = window.location.search;
  if (query) {
    document.querySelectorAll("a[href]").forEach(function (a) {
      var href = a.getAttribute("href");
      if (!href || /^[a-z][a-z0-9+.-]*:/i.test(href) || href.charAt(0) === "#" || href.indexOf("?") >= 0) return;
      var hash = href.indexOf("#");
      a.setAttribute("href", hash < 0 ? href + query : href.slice(0, hash) + query + href.slice(hash));
    });
  }
  // "Expand all" / "Collapse all" buttons for pages with many collapsible sections.
  document.querySelectorAll("[data-toggle-all]").forEach(function (button) {
    button.hidden = false;
    button.addEventListener("click", function () {
      var open = button.getAttribute("data-toggle-all") === "open";
      var scope = document.querySelector(button.getAttribute("data-scope") || "main");
      scope.querySelectorAll("details").forEach(function (d) { d.open = open; });
    });
  });
  // Opening a page at #L123 (or #anchor inside a collapsed section) reveals it.
  function reveal() {
    var id = decodeURIComponent(window.location.hash.slice(1));
    var target = id && document.getElementById(id);
    for (var node = target; node; node = node.parentElement) {
      if (node.tagName === "DETAILS") node.open = true;
    }
  }
  window.addEventListener("hashchange", reveal);
  reveal();
  // Clicking a line number (drawn by CSS) makes that line the page's address, like a link would.
  document.querySelectorAll("pre.code").forEach(function (pre) {
    pre.addEventListener("click", function (event) {
      var line = event.target;
      if (!line.id || line.parentElement !== pre) return;
      if (event.clientX - line.getBoundingClientRect().left > 70) return;
      window.location.hash = line.id;
    });
  });

  // A box that scrolls (a wide table, a long record) can be reached and scrolled from the keyboard.
  function focusableScrollers() {
    document.querySelectorAll(".scroll, pre.meta, pre.code").forEach(function (box) {
      var wide = box.scrollWidth > box.clientWidth + 1 || box.scrollHeight > box.clientHeight + 1;
      if (wide && !box.hasAttribute("tabindex")) {
        box.setAttribute("tabindex", "0");
        box.setAttribute("role", "region");
        var caption = box.previousElementSibling;
        var what = box.tagName === "PRE" ? "text, scrolls" : "table, scrolls sideways";
        box.setAttribute("aria-label", what + (caption && /^H[2-4]$/.test(caption.tagName) ? ": " + caption.textContent : ""));
      } else if (!wide && box.getAttribute("tabindex") === "0") {
        box.removeAttribute("tabindex");
        box.removeAttribute("role");
        box.removeAttribute("aria-label");
      }
    });
  }
  var scrollersQueued = false;
  function queueScrollers() {  // once per frame, however many sections "Expand all" opens
    if (scrollersQueued) return;
    scrollersQueued = true;
    window.requestAnimationFrame(function () { scrollersQueued = false; focusableScrollers(); });
  }
  focusableScrollers();
  window.addEventListener("resize", queueScrollers);
  document.addEventListener("toggle", queueScrollers, true);

  // Sortable tables: each th[data-sort] becomes a button; cells sort by data-sort-value, else their text.
  function cellKey(row, index, numeric) {
    var cell = row.cells[index];
    if (!cell) return numeric ? null : "";
    var value = cell.hasAttribute("data-sort-value") ? cell.getAttribute("data-sort-value") : cell.textContent.trim();
    if (!numeric) return value.toLowerCase();
    var number = parseFloat(value);
    return isNaN(number) ? null : number;
  }
  document.querySelectorAll("table[data-sortable]").forEach(function (table) {
    var body = table.tBodies[0];
    if (!body) return;
    var headers = table.tHead ? table.tHead.rows[0].cells : [];
    Array.prototype.forEach.call(headers, function (th, index) {
      var kind = th.getAttribute("data-sort");
      if (!kind) return;
      var button = document.createElement("button");
      button.type = "button";
      while (th.firstChild) button.appendChild(th.firstChild);
      th.appendChild(button);
      button.addEventListener("click", function () {
        var ascending = th.getAttribute("aria-sort") !== "ascending";
        Array.prototype.forEach.call(headers, function (other) { other.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
        var numeric = kind === "num";
        var rows = Array.prototype.slice.call(body.rows).map(function (row, position) {
          return { row: row, key: cellKey(row, index, numeric), position: position };
        });
        rows.sort(function (a, b) {
          if (a.key === b.key) return a.position - b.position;
          if (a.key === null) return 1;  // unknown values last, either way
          if (b.key === null) return -1;
          var order = a.key < b.key ? -1 : 1;
          return ascending ? order : -order;
        });
        rows.forEach(function (item) { body.appendChild(item.row); });
      });
    });
  });

  // Filter boxes: hide the rows of their table whose text does not hold every word typed.
  document.querySelectorAll("input[data-filter]").forEach(function (input) {
    var table = document.getElementById(input.getAttribute("data-filter"));
    if (!table || !table.tBodies[0]) return;
    var holder = input.closest(".filter");
    var status = holder && holder.querySelector("[role=status]");
    if (holder) holder.hidden = false;
    var rows = table.tBodies[0].rows;
    input.addEventListener("input", function () {
      var words = input.value.toLowerCase().split(/\s+/).filter(Boolean);
      var shown = 0;
      Array.prototype.forEach.call(rows, function (row) {
        var text = row.textContent.toLowerCase();
        var match = words.every(function (word) { return text.indexOf(word) >= 0; });
        row.hidden = !match;
        if (match) shown++;
      });
      if (status) status.textContent = words.length ? shown + " of " + rows.length + " shown" : "";
    });
  });

  // "Open in Perfetto": ui.perfetto.dev's postMessage handshake (PING until it answers PONG, then the trace).
  // A page opened from file:// cannot read chromium_events.json by itself (and the page's CSP allows no
  // fetch), so the reader picks the file once; offline, or without an answer, the page says how to load it.
  var PERFETTO = "https://ui.perfetto.dev";
  var BY_HAND = "To load it by hand: open " + PERFETTO + ", choose \u201cOpen trace file\u201d and pick chromium_events.json from this report\u2019s folder.";
  document.querySelectorAll("[data-perfetto]").forEach(function (box) {
    var button = box.querySelector("button");
    var pick = box.querySelector(".perfetto-pick");
    var input = pick && pick.querySelector("input");
    var status = box.querySelector(".perfetto-status");
    var trace = null;
    box.hidden = false;
    function say(text) { status.textContent = text; }
    function handshake(win) {
      say("Waiting for Perfetto to answer\u2026");
      var tries = 0;
      var timer = setInterval(function () {
        if (++tries > 200 || win.closed) { stop(); say("Perfetto did not answer. " + BY_HAND); return; }
        win.postMessage("PING", PERFETTO);
      }, 100);
      function stop() { clearInterval(timer); window.removeEventListener("message", onMessage); }
      function onMessage(event) {
        if (event.source !== win || event.origin !== PERFETTO || event.data !== "PONG") return;
        stop();
        win.postMessage({ perfetto: { buffer: trace, title: box.getAttribute("data-title") || "tlparse-py", fileName: "chromium_events.json" } }, PERFETTO);
        say("Sent chromium_events.json to Perfetto (in the new window).");
      }
      window.addEventListener("message", onMessage);
    }
    function open() {
      // opened at once, in the click: a window opened after loading would meet the pop-up blocker
      var win = window.open(PERFETTO + "/#!/", "_blank");
      if (!win) { say("The browser blocked the new window: allow pop-ups and press \u201cOpen in Perfetto\u201d again. " + BY_HAND); return null; }
      return win;
    }
    function send() {
      var win = open();
      if (win) handshake(win);
    }
    function askForTheFile(win) {
      if (win) win.close();
      pick.hidden = false;
      say("Pick chromium_events.json from this report\u2019s folder: a page opened from disk cannot read it by itself.");
      input.focus();
      input.click();
    }
    button.addEventListener("click", function () {
      if (navigator.onLine === false) { say("You are offline, so Perfetto cannot be opened from here. " + BY_HAND); return; }
      if (trace) { send(); return; }
      var source = box.getAttribute("data-events");
      if (!source) { askForTheFile(null); return; }
      var win = open();
      if (!win) return;
      say("Reading the trace events\u2026");
      var script = document.createElement("script");
      script.src = source;  // the report's own copy of chromium_events.json, as a script (file:// allows that)
      script.onload = function () {
        if (!window.TLPARSE_CHROMIUM_EVENTS) { askForTheFile(win); return; }
        trace = new TextEncoder().encode(JSON.stringify(window.TLPARSE_CHROMIUM_EVENTS)).buffer;
        handshake(win);
      };
      script.onerror = function () { askForTheFile(win); };  // too big to copy: the reader picks the file
      document.head.appendChild(script);
    });
    input.addEventListener("change", function () {
      var file = input.files && input.files[0];
      if (!file) return;
      var reader = new FileReader();
      reader.onload = function () {
        trace = reader.result;
        if (navigator.onLine === false) { say("You are offline, so Perfetto cannot be opened from here. " + BY_HAND); return; }
        send();
      };
      reader.onerror = function () { say("Could not read that file. " + BY_HAND); };
      reader.readAsArrayBuffer(file);
    });
  });
  // A live report (tlparse-py watch) polls its live.js: the version (a digest) of every page written so far.
  // fetch() of file:// is blocked, a <script> is not, so a fresh <script> is added every second.
  // This page reloads when another version of it is written, or when live.js is gone (the final
  // report, which does not poll, has replaced the live one).
  var live = document.querySelector('meta[name="tlparse-live"]');
  if (live) {
    var livePage = live.getAttribute("data-page"), liveVersion = live.getAttribute("data-version");
    var goneKey = "tlparse-live-gone:" + window.location.pathname;
    window.tlparseLive = function (state) {
      var latest = state.pages && state.pages[livePage];
      if (typeof latest === "string" && latest !== liveVersion) window.location.reload();
    };
    var poll = function () {
      var script = document.createElement("script");
      script.src = live.getAttribute("data-root") + "live.js?" + Date.now();
      script.onload = function () { script.remove(); window.setTimeout(poll, 1000); };
      script.onerror = function () {
        script.remove();
        var last = 0;
        try { last = Number(window.sessionStorage.getItem(goneKey) || 0); } catch (e) { /* storage off */ }
        if (Date.now() - last < 60000) return;  // reloaded for this already: the page stays as it is
        try { window.sessionStorage.setItem(goneKey, String(Date.now())); } catch (e) { /* storage off */ }
        window.location.reload();
      };
      document.head.appendChild(script);
    };
    window.setTimeout(poll, 1000);
    var clocks = document.querySelectorAll("[data-since-epoch]");
    if (clocks.length) {
      window.setInterval(function () {
        clocks.forEach(function (clock) {
          var seconds = Math.max(0, Math.round(Date.now() / 1000 - Number(clock.getAttribute("data-since-epoch"))));
          clock.textContent = seconds < 120 ? seconds + " s"
            : seconds < 7200 ? Math.floor(seconds / 60) + " min " + (seconds % 60) + " s"
            : Math.floor(seconds / 3600) + " h " + Math.floor(seconds % 3600 / 60) + " min";
        });
      }, 1000);
    }
  }
})();
